"""A trial page's model calls: once in full (the transcript), summarised in the timeline,
the stored record one fetch away (``/api/commit``)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest
from bench.viewer_stores import serving

from ..support.transcript_run import ARGUMENT, SYSTEM, transcript_run


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    path = tmp_path_factory.mktemp("calls") / "store.db"
    transcript_run(path)
    with serving(path) as url, httpx.Client(base_url=url, timeout=30) as http:
        yield http


def _get(client: httpx.Client, name: str, **params: object) -> httpx.Response:
    return client.get(f"/api/{name}", params={"id": "chat", "task": "task", **params})


def test_the_timeline_summarises_a_model_call_the_transcript_shows(client: httpx.Client) -> None:
    page = _get(client, "trial", trial=0).json()
    text = json.dumps(page)
    # The system prompt was sent once: the page carries it once (in the transcript).
    assert text.count(json.dumps(SYSTEM)[1:-1]) == 1
    calls = [c for c in page["timeline"] if c["kind"] == "model_call"]
    assert [c["seq"] for c in calls] == [e["seq"] for e in page["transcript"]]
    first = calls[0]
    summary = first["payload"]
    assert first["compact"] and summary["messages"] == 2  # a count, not the messages
    assert (summary["model"], summary["tool_calls"]) == ("chat-model", 2)
    assert (summary["input_tokens"], summary["output_tokens"], summary["failed"]) == (120, 30, 1)
    assert summary["tools"] == ["echo", "echo"] and summary["latency"] > 0
    assert summary["bytes"] > len(SYSTEM)


def test_a_commit_is_fetched_as_stored(client: httpx.Client) -> None:
    page = _get(client, "trial", trial=0).json()
    seq = next(c["seq"] for c in page["timeline"] if c["kind"] == "model_call")
    raw = _get(client, "commit", trial=0, seq=seq).json()
    assert (raw["seq"], raw["kind"]) == (seq, "model_call")
    assert raw["payload"]["messages"][0] == {"role": "system", "content": SYSTEM}
    arguments = json.loads(raw["payload"]["tool_calls"][0]["arguments"])
    assert arguments == {"text": ARGUMENT, "n": 1}
    for params, named in (
        ({"trial": 0, "seq": 99}, "no commit 99"),
        ({"trial": 0, "seq": "x"}, "'x'"),
        ({"trial": 0}, "'seq'"),
        ({"trial": 0, "seq": 1, "task": "nope"}, "'nope'"),
    ):
        response = _get(client, "commit", **params)
        assert response.status_code == 400 and named in response.json()["error"], params
