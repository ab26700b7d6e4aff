"""`HostileChatServer`: an OpenAI-compatible endpoint that misbehaves on purpose.

Every way a real endpoint (or a proxy in front of one) has hurt a client:
answers that trickle in, never end, explode when decompressed or are simply
huge, bodies of the wrong shape, hundreds of tool calls, absurd usage, and
rate limits that never lift. Use it to check that a client or an agent ends
each trial with a recorded status instead of hanging or running out of memory.
"""

from __future__ import annotations

import json
import threading
import zlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from io import BufferedIOBase
from typing import Any

from ._chat_server import ChatReply, FakeChatServer, Reply, Script

_CHUNK = 64 * 1024
_MB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class HostileReply:
    """A reply that misbehaves at the HTTP level. Build one with the class methods;
    `FakeChatServer` and `HostileChatServer` play it like a `ChatReply`."""

    #: What it does: ``"slow_headers"``, ``"slow_body"``, ``"endless"``, ``"gzip_bomb"``,
    #: ``"huge"`` or ``"body"``.
    kind: str
    #: Bytes a second of a slow reply; seconds between the chunks of an endless one.
    pace: float = 1.0
    #: The decoded size of a huge reply or a gzip bomb, in bytes.
    size: int = 0
    #: The body a ``"body"`` reply sends as it is, with ``status``.
    body: bytes = b""
    status: int = 200
    headers: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def slow_headers(cls, bytes_per_second: float = 1.0) -> HostileReply:
        """A valid completion, every byte of it (status line and headers too) trickling
        in at ``bytes_per_second``: no single read waits long, the whole does."""
        return cls("slow_headers", pace=bytes_per_second)

    @classmethod
    def slow_body(cls, bytes_per_second: float = 1.0) -> HostileReply:
        """Headers at once, then a valid completion at ``bytes_per_second``."""
        return cls("slow_body", pace=bytes_per_second)

    @classmethod
    def endless(cls, interval: float = 0.05) -> HostileReply:
        """A 200 with a chunked body that never ends: a space every ``interval`` s."""
        return cls("endless", pace=interval)

    @classmethod
    def gzip_bomb(cls, size: int = 2 * 1024 * _MB) -> HostileReply:
        """A gzip-encoded completion whose text expands to ``size`` bytes (2 GB by
        default, from about 2 MB on the wire), generated as it is sent."""
        return cls("gzip_bomb", size=size)

    @classmethod
    def huge(cls, size: int = 50 * _MB) -> HostileReply:
        """A valid completion whose text is ``size`` bytes long, with its length."""
        return cls("huge", size=size)

    @classmethod
    def raw(
        cls, body: Any, *, status: int = 200, headers: Mapping[str, str] | None = None
    ) -> HostileReply:
        """``body`` as the answer: bytes as they are, anything else as its JSON."""
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        return cls("body", body=data, status=status, headers=dict(headers or {}))

    @classmethod
    def shaped(cls, **message: Any) -> HostileReply:
        """A completion whose first choice's message has exactly these fields, e.g.
        ``shaped(content={"a": 1})`` or ``shaped(tool_calls=5)``."""
        return cls.raw({"choices": [{"index": 0, "message": message}]})

    def play(self, out: BufferedIOBase, closed: threading.Event) -> None:
        """Write this reply to ``out`` (stopping early once ``closed`` is set)."""
        if self.kind == "slow_headers":
            _trickle(out, _response(200, _completion(), {}), self.pace, closed)
        elif self.kind == "slow_body":
            data = _completion()
            out.write(_head(200, {"content-length": str(len(data))}))
            _trickle(out, data, self.pace, closed)
        elif self.kind == "endless":
            out.write(_head(200, {"transfer-encoding": "chunked"}))
            while not closed.wait(self.pace):
                out.write(b"1\r\n \r\n")
        elif self.kind == "gzip_bomb":
            headers = {"transfer-encoding": "chunked", "content-encoding": "gzip"}
            out.write(_head(200, headers))
            for part in _gzip(self.size):
                if closed.is_set():
                    return
                out.write(b"%x\r\n%s\r\n" % (len(part), part))
            out.write(b"0\r\n\r\n")
        elif self.kind == "huge":
            prefix, suffix = _completion_around()
            length = len(prefix) + self.size + len(suffix)
            out.write(_head(200, {"content-length": str(length)}) + prefix)
            for part in _text(self.size):
                if closed.is_set():
                    return
                out.write(part)
            out.write(suffix)
        else:
            out.write(_response(self.status, self.body, self.headers))


def hostile_replies(
    *, bytes_per_second: float = 1.0, interval: float = 0.05, size: int = 64 * _MB
) -> dict[str, Reply]:
    """One reply of every hostile kind, by name (for tests that try them all)."""
    return {
        "slow_headers": HostileReply.slow_headers(bytes_per_second),
        "slow_body": HostileReply.slow_body(bytes_per_second),
        "endless": HostileReply.endless(interval),
        "gzip_bomb": HostileReply.gzip_bomb(size),
        "huge": HostileReply.huge(size),
        "not_json": HostileReply.raw(b"<html>502 Bad Gateway</html>"),
        "not_an_object": HostileReply.raw([1, 2, 3]),
        "no_choices": HostileReply.raw({"choices": []}),
        "tool_calls_not_a_list": HostileReply.shaped(content=None, tool_calls=5),
        "tool_call_not_an_object": HostileReply.shaped(content=None, tool_calls=[7]),
        "object_content": HostileReply.shaped(content={"answer": 42}),
        "many_tool_calls": ChatReply.tools(*[("echo", {"i": i}) for i in range(5000)]),
        "huge_usage": ChatReply.text("fine", usage=(10**30, 10**30)),
        "retry_after_zero": ChatReply.rate_limited(0),
        "retry_after_huge": ChatReply.rate_limited(1e9),
        "retry_after_year_9999": ChatReply.rate_limited("Fri, 31 Dec 9999 23:59:59 GMT"),
        "reset_99999h": ChatReply.rate_limited(reset="99999h"),
        "quota_exhausted": ChatReply.failure(
            429, "You exceeded your quota", code="insufficient_quota"
        ),
    }


class HostileChatServer(FakeChatServer):
    """A `FakeChatServer` that also plays `HostileReply`; given one reply (rather than
    a list or a function), it answers every request with it, forever."""

    def __init__(
        self, script: ChatReply | HostileReply | Script | Iterable[Reply] | None = None
    ) -> None:
        if isinstance(script, ChatReply | HostileReply):
            reply = script
            super().__init__(lambda body: reply)
        else:
            super().__init__(script)


def _head(status: int, headers: Mapping[str, str]) -> bytes:
    lines = [f"HTTP/1.1 {status} Hostile", "content-type: application/json"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def _response(status: int, body: bytes, headers: Mapping[str, str]) -> bytes:
    return _head(status, {**headers, "content-length": str(len(body))}) + body


def _trickle(out: BufferedIOBase, data: bytes, per_second: float, closed: threading.Event) -> None:
    for i in range(len(data)):
        if closed.wait(1 / per_second):
            return
        out.write(data[i : i + 1])


def _completion_around() -> tuple[bytes, bytes]:
    """The bytes of a completion before and after its message's text."""
    body = json.dumps(
        {
            "id": "chatcmpl-hostile",
            "object": "chat.completion",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": "@@"},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }
    ).encode()
    prefix, suffix = body.split(b"@@")
    return prefix, suffix


def _completion() -> bytes:
    prefix, suffix = _completion_around()
    return prefix + b"slow but sure" + suffix


def _text(size: int) -> Iterator[bytes]:
    block = b"a" * _CHUNK
    for start in range(0, size, _CHUNK):
        yield block[: min(_CHUNK, size - start)]


def _gzip(size: int) -> Iterator[bytes]:
    """A gzip stream of a completion with ``size`` bytes of text, made as it is sent:
    after a full flush a block of the same text compresses to the same bytes, so one
    compressed block is repeated and only the CRC is computed for each."""
    prefix, suffix = _completion_around()
    compressor = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    crc = zlib.crc32(prefix)
    yield b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff"  # the gzip header: deflate, no name
    yield compressor.compress(prefix) + compressor.flush(zlib.Z_FULL_FLUSH)
    block = b"a" * _MB
    packed = compressor.compress(block) + compressor.flush(zlib.Z_FULL_FLUSH)
    for start in range(0, size, _MB):
        part = block[: min(_MB, size - start)]
        if len(part) == _MB:
            yield packed
        else:
            yield compressor.compress(part) + compressor.flush(zlib.Z_FULL_FLUSH)
        crc = zlib.crc32(part, crc)
    yield compressor.compress(suffix) + compressor.flush()
    crc = zlib.crc32(suffix, crc)
    total = len(prefix) + size + len(suffix)
    yield crc.to_bytes(4, "little") + (total & 0xFFFFFFFF).to_bytes(4, "little")
