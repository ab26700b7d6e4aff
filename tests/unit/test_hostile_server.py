"""`HostileChatServer` plays every hostile reply over real HTTP on 127.0.0.1 (checked
here with a plain httpx client, byte for byte where it matters)."""

from __future__ import annotations

import json
import time

import httpx
import pytest

from corral.testing import ChatReply, HostileChatServer, HostileReply, hostile_replies

BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


def post(server: HostileChatServer, timeout: float = 5.0) -> httpx.Response:
    return httpx.post(server.url + "/chat/completions", json=BODY, timeout=timeout)


def content(response: httpx.Response) -> object:
    return response.json()["choices"][0]["message"]["content"]


@pytest.mark.parametrize("kind", ["slow_headers", "slow_body"])
def test_slow_replies_trickle_a_valid_completion(kind: str) -> None:
    reply = getattr(HostileReply, kind)(4000.0)
    with HostileChatServer(reply) as server:
        start = time.monotonic()
        response = post(server)
        took = time.monotonic() - start
    assert response.status_code == 200 and content(response) == "slow but sure"
    assert took >= len(response.content) / 4000.0


def test_an_endless_body_keeps_coming() -> None:
    with HostileChatServer(HostileReply.endless(0.001)) as server:
        with httpx.stream("POST", server.url + "/chat/completions", json=BODY) as response:
            assert response.headers["transfer-encoding"] == "chunked"
            received = 0
            for part in response.iter_raw():
                received += len(part)
                if received >= 20:
                    break
    assert received >= 20


def test_a_gzip_bomb_expands_to_its_size() -> None:
    size = 3 * 1024 * 1024 + 5
    with HostileChatServer(HostileReply.gzip_bomb(size)) as server:
        response = post(server)
    assert response.headers["content-encoding"] == "gzip"
    assert int(response.num_bytes_downloaded) < size // 100  # small on the wire
    assert content(response) == "a" * size


def test_a_huge_reply_is_a_valid_completion_of_its_size() -> None:
    with HostileChatServer(HostileReply.huge(1_000_000)) as server:
        response = post(server)
    assert content(response) == "a" * 1_000_000


def test_raw_and_shaped_bodies_are_sent_as_given() -> None:
    replies = [
        HostileReply.raw(b"<html>oops</html>", status=502, headers={"x-a": "1"}),
        HostileReply.shaped(content={"a": 1}, tool_calls=5),
    ]
    with HostileChatServer(replies) as server:
        first, second = post(server), post(server)
    assert (first.status_code, first.content, first.headers["x-a"]) == (
        502,
        b"<html>oops</html>",
        "1",
    )
    assert second.json() == {
        "choices": [{"index": 0, "message": {"content": {"a": 1}, "tool_calls": 5}}]
    }


def test_one_reply_is_played_forever() -> None:
    with HostileChatServer(ChatReply.rate_limited(0)) as server:
        statuses = [post(server).status_code for _ in range(3)]
        assert statuses == [429] * 3 and server.calls == 3
        assert post(server).headers["retry-after"] == "0"


def test_the_catalogue_names_every_kind() -> None:
    replies = hostile_replies(size=1024)
    kinds = {r.kind for r in replies.values() if isinstance(r, HostileReply)}
    assert kinds == {"slow_headers", "slow_body", "endless", "gzip_bomb", "huge", "body"}
    many = replies["many_tool_calls"]
    assert isinstance(many, ChatReply) and len(many.tool_calls) == 5000
    with HostileChatServer([replies["huge_usage"]]) as server:
        usage = post(server).json()["usage"]
    assert usage["prompt_tokens"] == 10**30 and json.dumps(usage)
