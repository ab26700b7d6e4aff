"""A gzip body followed by trailing bytes in the same read: the decoder must stop at
the end of the stream (as httpx's did), not spin forever in the event loop."""

from __future__ import annotations

import gzip
import json
import zlib

import pytest

from corral.models import _http

BODY = json.dumps({"a": "x" * 100_000}).encode()  # > one 64 KiB piece when decoded


class Counted:
    """A decompressobj that refuses to be called absurdly often (a spin, not a hang)."""

    def __init__(self, obj: object) -> None:
        self.obj, self.calls = obj, 0

    def decompress(self, data: bytes, max_length: int = 0) -> bytes:
        self.calls += 1
        if self.calls > 1000:
            raise AssertionError("decompress called 1000 times: the decoder spins")
        return self.obj.decompress(data, max_length)

    def __getattr__(self, name: str) -> object:
        return getattr(self.obj, name)


def decode(header: str, chunks: list[bytes]) -> bytes:
    stages = _http._decoders(header)
    for stage in stages:
        stage.obj = Counted(stage.obj)
    return b"".join(p for c in chunks for p in _http._decoded(stages, c))


@pytest.mark.parametrize(
    "trailer",
    [b"\r\n", b"garbage", gzip.compress(b"more", mtime=0)],
    ids=["crlf", "garbage", "a second member"],  # the same on every test worker
)
def test_gzip_then_trailing_bytes_in_one_read_ends(trailer: bytes) -> None:
    assert decode("gzip", [gzip.compress(BODY) + trailer]) == BODY


def test_deflate_then_trailing_bytes_in_one_read_ends() -> None:
    assert decode("deflate", [zlib.compress(BODY) + b"\n"]) == BODY


def test_trailing_bytes_in_a_later_read_are_ignored() -> None:
    assert decode("gzip", [gzip.compress(BODY), b"garbage"]) == BODY
