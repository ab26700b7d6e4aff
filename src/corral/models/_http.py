"""What every HTTP model client shares: settings checked up front, a pooled connection
pool sized to the run, one deadline per request, a capped read, errors by status."""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import ssl
import zlib
from collections.abc import AsyncIterator, Collection, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any, Self
from urllib.parse import urlsplit

import anyio
import httpx

from .._chat import ChatResponse, without_password
from .._checks import non_negative_number, positive_int, seconds
from .._concurrency import concurrency
from .._errors import ConfigError, ModelError, ModelUnavailable
from ._status import status_error

#: Connections of a client used outside a run (``async with model:``).
DEFAULT_CONNECTIONS = 64
#: The largest decoded reply read by default (a chat completion is rarely 1 MB).
DEFAULT_MAX_RESPONSE_BYTES = 16 * 1024 * 1024
#: Of an error body, only a message is shown: read no more than this of it.
_ERROR_BODY_BYTES = 64 * 1024
#: The most bytes one decompression step may produce: a gzip bomb is refused after
#: about this much past the cap, never after a whole read's worth (x1000) of it.
_PIECE = 64 * 1024
#: The most content codings one reply may stack ("gzip, gzip, ...").
_MAX_CODINGS = 4
#: The content codings decoded here (httpx's own decoder has no bound on its output).
ACCEPTED_ENCODINGS = "gzip, deflate"


@functools.cache
def _tls_context() -> ssl.SSLContext:
    """httpx's default TLS context (certifi's CAs, or SSL_CERT_FILE / SSL_CERT_DIR), made
    once per process: reading the CA bundle costs 25 ms, which every new client paid."""
    return httpx.create_ssl_context()


class HTTPModel:
    """The transport of a model client; a subclass sets ``url`` and the headers and
    turns a decoded 2xx body into a `ChatResponse` (`parse`, a ValueError if it is
    not one). ``reply_kind`` names what a reply should be, in errors."""

    reply_kind = "a reply"

    def __init__(
        self,
        model: str,
        base_url: str,
        url_path: str,
        headers: Mapping[str, str],
        timeout: float,
        max_response_bytes: int,
        max_connections: int | None = None,
    ) -> None:
        if not isinstance(model, str) or not model.strip():
            raise ConfigError(f"model must be a non-empty string, not {model!r}")
        self.model = model
        self.base_url = check_base_url(base_url)
        #: The most requests of this client in flight at once (None: the run's limits).
        self.max_connections = (
            None if max_connections is None else positive_int("max_connections", max_connections)
        )
        #: The `corral.concurrency` scope its requests wait in (None without a bound):
        #: one per model and endpoint, so it holds across a run's trials, scorers and
        #: Ray hosts alike, and the progress display shows its use. Never the URL's
        #: user and password: the name is shown and recorded.
        self.connection_scope = (
            None if max_connections is None else f"requests {model} @ {endpoint(self.base_url)}"
        )
        self.timeout = float(seconds("timeout", timeout))
        self.max_response_bytes = positive_int("max_response_bytes", max_response_bytes)
        self.url = self.base_url + url_path
        #: ``url`` as messages show it: a password in it masked.
        self.shown_url = without_password(self.url)
        self._headers = {
            "content-type": "application/json",
            "accept-encoding": ACCEPTED_ENCODINGS,
            **headers,
        }
        self._client: httpx.AsyncClient | None = None
        self._users = 0
        #: The size of the pool open now (None: none is open).
        self.connections: int | None = None

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({self.model!r}, base_url={without_password(self.base_url)!r})"
        )

    def parse(self, body: object) -> ChatResponse:
        raise NotImplementedError

    def request_body(self, messages: Sequence[Mapping[str, Any]], **options: Any) -> dict[str, Any]:
        """The JSON body `complete` sends (``options`` are its keywords)."""
        raise NotImplementedError

    async def complete(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        model: str | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
        seed: int | None = None,
    ) -> ChatResponse:
        """One call: the reply's text, tool calls and usage (with cost)."""
        body = self.request_body(
            messages,
            tools=tools,
            model=model,
            max_tokens=max_tokens,
            temperature=temperature,
            seed=seed,
        )
        return await self.post(body)

    # -- the connection pool -------------------------------------------------------

    def run_context(self, info: Any) -> Any:
        """The pool a run uses (the runner enters it through the agent that holds
        this model), sized to the most requests the run can have in flight."""
        return self.pool(pool_size(info))

    async def __aenter__(self) -> Self:
        await self._open(DEFAULT_CONNECTIONS)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._close()

    @asynccontextmanager
    async def pool(self, connections: int) -> AsyncIterator[None]:
        """Share one pool of ``connections`` connections while inside (re-entrant:
        the first to enter opens it, the last to leave closes it)."""
        await self._open(connections)
        try:
            yield
        finally:
            await self._close()

    async def _open(self, connections: int) -> None:
        if self._client is None:
            connections = self._pool_of(connections)
            self._client = self._new_client(connections)
            self.connections = connections
        self._users += 1

    async def _close(self) -> None:
        self._users -= 1
        if self._users == 0 and self._client is not None:
            client, self._client = self._client, None
            self.connections = None
            with anyio.CancelScope(shield=True):  # a cancelled run still closes its sockets
                await client.aclose()

    def _new_client(self, connections: int) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            headers=self._headers,
            verify=_tls_context(),
            # Waiting for a free connection is queueing, not a failure of the endpoint.
            timeout=httpx.Timeout(self.timeout, pool=None),
            limits=httpx.Limits(max_connections=connections, max_keepalive_connections=connections),
        )

    def _pool_of(self, connections: int) -> int:
        """A pool of ``connections``, or fewer where ``max_connections`` bounds them."""
        return (
            connections if self.max_connections is None else min(connections, self.max_connections)
        )

    # -- one request ---------------------------------------------------------------

    async def post(self, body: Mapping[str, Any]) -> ChatResponse:
        """Send ``body`` as JSON to ``url``; the reply parsed, or Corral's error. With
        ``max_connections``, first a slot of its scope (`connection_scope`)."""
        content = json.dumps(body, ensure_ascii=False).encode()
        if self.connection_scope is None or self.max_connections is None:
            return await self._post(content)
        slot = concurrency(self.connection_scope, self.max_connections)
        try:
            await slot.__aenter__()
        except ConfigError as exc:  # another client of the scope has another limit
            raise ConfigError(
                f"{type(self).__name__}({self.model!r}, max_connections="
                f"{self.max_connections}): another client of model {self.model!r} at this "
                "endpoint has another max_connections, and they share one bound; give "
                f"them the same max_connections ({exc})"
            ) from None
        try:
            return await self._post(content)
        finally:
            await slot.__aexit__(None, None, None)

    async def _post(self, content: bytes) -> ChatResponse:
        if self._client is not None:
            return await self._send(self._client, content)
        async with self._new_client(1) as client:
            return await self._send(client, content)

    async def _send(self, client: httpx.AsyncClient, content: bytes) -> ChatResponse:
        url = self.shown_url
        started: list[float] = []  # when the exchange began on the wire
        # httpx bounds each read only: a reply trickling in a byte at a time, or one
        # that never ends, would never time out. So one deadline covers the whole
        # exchange, from the first byte sent (waiting for a pooled connection before
        # that is queueing, not a slow endpoint).
        with anyio.CancelScope() as deadline:

            async def trace(event: str, info: Mapping[str, Any]) -> None:
                if not started:  # connecting (a new connection), else sending
                    started.append(anyio.current_time())
                if event.endswith("send_request_headers.started") and deadline.deadline == math.inf:
                    deadline.deadline = anyio.current_time() + self.timeout

            try:
                async with client.stream(
                    "POST", self.url, content=content, extensions={"trace": trace}
                ) as response:
                    ok = response.status_code < 300
                    body = await self._read(response, ok)
            except httpx.TimeoutException as exc:
                raise self._timed_out(exc) from exc
            except httpx.DecodingError as exc:
                raise ModelUnavailable(f"the reply from {url} could not be decoded: {exc}") from exc
            except httpx.TransportError as exc:  # refused, reset, or dropped mid-response
                raise ModelUnavailable(
                    f"connection to {url} failed: {type(exc).__name__}: {exc}",
                    failure_kind="dropped",
                ) from exc
        if deadline.cancelled_caught:
            raise self._timed_out(None)
        if response.status_code >= 300:
            raise status_error(response.status_code, response.headers, body, url)
        try:
            reply = self.parse(json.loads(body))
        # A proxy's error page, a cut body, JSON nested past the decoder's recursion
        # limit: worth another try.
        except (ValueError, RecursionError) as exc:
            raise ModelUnavailable(
                f"HTTP {response.status_code} from {url} is not {self.reply_kind}: {exc}",
                status_code=response.status_code,
            ) from exc
        return exchanged(reply, started)

    async def _read(self, response: httpx.Response, ok: bool) -> bytes:
        """The decoded body, counted as it comes: past the cap, a reply is an error
        and an error body is cut (only its message is shown). It is decompressed
        here, a bounded piece at a time, so the cap bounds memory too."""
        limit = self.max_response_bytes if ok else _ERROR_BODY_BYTES
        parts: list[bytes] = []
        size = 0
        try:
            stages = _decoders(response.headers.get("content-encoding", ""))
        except ValueError as exc:
            if not ok:
                return b""
            raise ModelUnavailable(
                f"HTTP {response.status_code} from {self.shown_url}: {exc}",
                status_code=response.status_code,
            ) from None
        try:
            async for raw in response.aiter_raw():
                for part in _decoded(stages, raw):
                    size += len(part)
                    if size > limit:
                        if not ok:
                            parts.append(part[: limit - size + len(part)])
                            return b"".join(parts)
                        raise ModelError(
                            f"the reply from {self.shown_url} has more than max_response_bytes="
                            f"{limit} bytes (decoded): not read further",
                            status_code=response.status_code,
                        )
                    parts.append(part)
        except zlib.error as exc:
            if not ok:  # an error body: its message, as far as it decoded
                return b"".join(parts)
            raise ModelUnavailable(
                f"HTTP {response.status_code} from {self.shown_url} could not be decompressed "
                f"({response.headers.get('content-encoding')}): {exc}",
                status_code=response.status_code,
            ) from None
        return b"".join(parts)

    def _timed_out(self, exc: Exception | None) -> ModelUnavailable:
        why = "" if exc is None else f" ({type(exc).__name__})"
        return ModelUnavailable(
            f"no answer from {self.shown_url} within the timeout of {self.timeout:g} s{why}",
            failure_kind="timeout",
        )


class _Inflate:
    """One gzip or deflate coding, undone a bounded piece at a time."""

    def __init__(self, gzip: bool) -> None:
        self.gzip = gzip
        self.raw_deflate_tried = gzip
        self.obj = zlib.decompressobj(zlib.MAX_WBITS | 16 if gzip else zlib.MAX_WBITS)

    def feed(self, data: bytes) -> Iterator[bytes]:
        # Past the end of the stream, bytes are ignored, as httpx's decoder ignored
        # them (zlib keeps a stale ``unconsumed_tail`` after its end: never fed again).
        while not self.obj.eof:
            try:
                out = self.obj.decompress(data, _PIECE)
            except zlib.error:
                if self.raw_deflate_tried:
                    raise
                # "deflate" sent as a raw stream, without zlib's header (as httpx reads it).
                self.raw_deflate_tried = True
                self.obj = zlib.decompressobj(-zlib.MAX_WBITS)
                continue
            self.raw_deflate_tried = True
            data = self.obj.unconsumed_tail
            if out:
                yield out
            if self.obj.eof or (not data and len(out) < _PIECE):
                return


def _decoders(header: str) -> list[_Inflate]:
    """The decoders of a Content-Encoding, in the order they apply (the last coding
    named is undone first); ValueError naming a coding not decoded here."""
    stages = []
    for coding in reversed([c.strip().lower() for c in header.split(",")]):
        if coding in ("", "identity"):
            continue
        if coding not in ("gzip", "x-gzip", "deflate"):
            raise ValueError(f"the reply's content-encoding {coding!r} is not supported")
        stages.append(_Inflate(gzip=coding != "deflate"))
    if len(stages) > _MAX_CODINGS:  # each is a decoder and a level of `_decoded`
        raise ValueError(f"the reply names {len(stages)} content codings")
    return stages


def _decoded(stages: Sequence[_Inflate], data: bytes) -> Iterator[bytes]:
    if not stages:
        if data:
            yield data
        return
    for piece in stages[0].feed(data):
        yield from _decoded(stages[1:], piece)


def pool_size(info: Any) -> int:
    """The most model requests a run can have in flight: its executions (bounded by
    ``max_parallel`` and, when every model of the run has one, the sum of the
    per-model limits) plus its evaluations (a scorer may ask a model too)."""
    limits = info.limits
    plan = info.plan
    executions = limits.max_parallel
    models = {meta.model for meta in plan.lights()}
    by_model = limits.max_parallel_by_model
    if models and all(m is not None and m in by_model for m in models):
        executions = min(executions, sum(by_model[m] for m in models if m is not None))
    total: int = min(limits.max_parallel_total, executions + limits.max_parallel_evaluations)
    return max(1, total)


def endpoint(base_url: str) -> str:
    """The host of ``base_url`` as one endpoint is named however its URL is spelled: in
    lower case, with its port unless it is the scheme's own, never with a user or
    password."""
    parts = urlsplit(base_url)
    host = parts.hostname or parts.netloc.rpartition("@")[2]
    if ":" in host:  # IPv6
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:  # not a number: as written
        return parts.netloc.rpartition("@")[2].lower()
    if port is None or port == {"http": 80, "https": 443}.get(parts.scheme):
        return host
    return f"{host}:{port}"


def check_base_url(base_url: object) -> str:
    if not isinstance(base_url, str):
        raise ConfigError(f"base_url must be an http(s) URL, not {base_url!r}")
    parts = urlsplit(base_url.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ConfigError(f"base_url must be an http:// or https:// URL, not {base_url!r}")
    return base_url.strip().rstrip("/")


def check_api_key(api_key: object) -> str | None:
    if api_key is not None and not isinstance(api_key, str):
        raise ConfigError("api_key must be a string or None")
    return api_key or None


def check_prices(prices: object, keys: Collection[str]) -> dict[str, float] | None:
    """Dollars per million tokens by kind; only ``keys`` are known."""
    if prices is None:
        return None
    if not isinstance(prices, Mapping):
        raise ConfigError(
            f"prices must be a mapping like {{'input': 2.5, 'output': 10}}, not {prices!r}"
        )
    out = {}
    for key, value in prices.items():
        if key not in keys:
            expected = ", ".join(repr(k) for k in keys)
            raise ConfigError(
                f"prices has unknown key {key!r}; expected {expected} (dollars per million tokens)"
            )
        out[key] = float(non_negative_number(f"prices[{key!r}]", value))
    return out


def call_setting(key: str) -> str:
    """Where a setting each call sends is set: the call's keyword, as an agent gives it."""
    return f"the call's {key}= (ToolAgent({key}=...))"


def check_extra_body(
    extra_body: object, reserved: Collection[str], settings: Mapping[str, str] = {}
) -> dict[str, Any]:
    """The fields merged into every request; none of ``reserved`` (each call's own), nor
    of ``settings`` (sent from what the caller set, and recorded as it: merged last,
    extra_body would replace it unseen; the value says where to set it), nor a true
    ``stream``: a streamed reply is a series of events, not one reply, so every call
    would fail (and be retried) as a reply that cannot be read."""
    if extra_body is None:
        return {}
    if not isinstance(extra_body, Mapping):
        raise ConfigError(f"extra_body must be a mapping, not {extra_body!r}")
    for key in reserved:
        if key in extra_body:
            raise ConfigError(f"extra_body may not set {key!r}: each call sends its own")
    for key, instead in settings.items():
        if key in extra_body:
            raise ConfigError(
                f"extra_body may not set {key!r}: it would override what each call sends; "
                f"set it with {instead}"
            )
    if extra_body.get("stream"):
        raise ConfigError(
            f"extra_body may not set 'stream' to {extra_body['stream']!r}: "
            "replies are read whole, never streamed"
        )
    try:
        json.dumps(extra_body)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"extra_body is not JSON: {exc}") from None
    return dict(extra_body)


def exchanged(reply: ChatResponse, started: Sequence[float]) -> ChatResponse:
    """``reply`` with its ``latency``: the seconds since its request began on the wire
    (``started``; a wait for a connection slot or a pooled connection before it is
    left out), if it did."""
    if not started:
        return reply
    return dataclasses.replace(reply, latency=max(0.0, anyio.current_time() - started[0]))
