"""`FakeChatServer`: a scriptable OpenAI-compatible chat endpoint on 127.0.0.1, and
the plumbing every fake model server shares (`FakeModelServer`).

It runs the standard library's threading HTTP server in a daemon thread, so
it needs no dependency and serves sync and async tests (either backend) alike.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from io import BufferedIOBase
from types import MappingProxyType
from typing import Any, Protocol, Self

_NO_HEADERS: Mapping[str, str] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class ChatReply:
    """What `FakeChatServer` answers to one request. Build one with the class methods."""

    content: str | None = None
    #: (name, arguments): a mapping is sent as its JSON text, a string as it is
    #: (so a test can send malformed JSON).
    tool_calls: tuple[tuple[str, Any], ...] = ()
    #: (prompt tokens, completion tokens); None: about four characters a token.
    usage: tuple[int, int] | None = None
    #: The model's thinking: a thinking block from `FakeAnthropicServer`, the
    #: message's ``reasoning_content`` from `FakeChatServer`.
    reasoning: str | None = None
    #: Thinking the provider hides: a ``redacted_thinking`` block (its data opaque
    #: and signed) before the reply's thinking, from `FakeAnthropicServer` only.
    redacted: str | None = None
    #: Prompt tokens (read from, written to) the prompt cache (`FakeAnthropicServer`).
    cache: tuple[int, int] = (0, 0)
    #: Content blocks sent as they are after the thinking, before the text: a server
    #: tool's use and result (a web search), and text among them (`FakeAnthropicServer`).
    served: tuple[Mapping[str, Any], ...] = ()
    status: int = 200
    headers: Mapping[str, str] = field(default_factory=lambda: _NO_HEADERS)
    #: The message of an error body (``{"error": {"message": ...}}``).
    error: str = ""
    error_code: str | None = None
    #: Seconds before answering (a slow model).
    delay: float = 0.0
    #: ``"drop"``: close the connection half-way through the body; ``"hang"``: never answer.
    fault: str | None = None

    @classmethod
    def text(
        cls,
        content: str,
        *,
        usage: tuple[int, int] | None = None,
        delay: float = 0.0,
        reasoning: str | None = None,
    ) -> ChatReply:
        """A reply without tool calls."""
        return cls(content=content, usage=usage, delay=delay, reasoning=reasoning)

    @classmethod
    def tools(
        cls,
        *calls: tuple[str, Any],
        content: str | None = None,
        usage: tuple[int, int] | None = None,
        delay: float = 0.0,
        reasoning: str | None = None,
    ) -> ChatReply:
        """A reply with one tool call per ``(name, arguments)``; several are parallel."""
        return cls(
            content=content,
            tool_calls=tuple(calls),
            usage=usage,
            delay=delay,
            reasoning=reasoning,
        )

    @classmethod
    def failure(
        cls,
        status: int,
        message: str = "",
        *,
        headers: Mapping[str, str] | None = None,
        code: str | None = None,
    ) -> ChatReply:
        """An error status with an OpenAI-style error body."""
        return cls(
            status=status,
            error=message or f"simulated HTTP {status}",
            error_code=code,
            headers=dict(headers or {}),
        )

    @classmethod
    def rate_limited(
        cls,
        retry_after: float | str | None = None,
        *,
        retry_after_ms: float | None = None,
        reset: str | None = None,
        status: int = 429,
    ) -> ChatReply:
        """A 429 saying when to come back: ``retry-after`` (seconds, or an HTTP date as
        a string), ``retry-after-ms``, or ``x-ratelimit-reset-requests`` (``"1.5s"``)."""
        headers = {}
        if retry_after is not None:
            headers["retry-after"] = str(retry_after)
        if retry_after_ms is not None:
            headers["retry-after-ms"] = str(retry_after_ms)
        if reset is not None:
            headers["x-ratelimit-reset-requests"] = reset
            headers["x-ratelimit-remaining-requests"] = "0"
        return cls.failure(status, "Rate limit reached (simulated)", headers=headers)

    @classmethod
    def drop(cls) -> ChatReply:
        """Send the headers and half the body, then close the connection."""
        return cls(content="this reply is cut short", fault="drop")

    @classmethod
    def hang(cls) -> ChatReply:
        """Never answer (until the server closes)."""
        return cls(fault="hang")


class RawReply(Protocol):
    """A reply that writes its own bytes (status line, headers, body): how
    `corral.testing.HostileReply` misbehaves at the HTTP level."""

    def play(self, out: BufferedIOBase, closed: threading.Event) -> None:
        """Write the reply to ``out``; stop early once ``closed`` is set."""


Reply = ChatReply | RawReply
Script = Callable[[dict[str, Any]], Reply]


class FakeModelServer:
    """A model endpoint on 127.0.0.1 answering ``POST`` requests with scripted replies;
    a subclass says which paths it serves and how a reply is written (`render`,
    `error_body`), and may refuse a request the real API would (`refuse`).

    Each request is answered by the next reply given to `enqueue` (or the
    ``script`` list), else by calling ``script`` with the request's JSON body. A
    reply is a `ChatReply`, or one that writes its own bytes (`HostileReply`).
    ``calls`` counts the requests and ``requests`` keeps their bodies (and
    ``headers`` their headers). Use it as a context manager, or `start` and
    `close` it; ``url`` is the base URL to give a client. It does real network
    I/O: a test driving it must not use an autojumping clock (trio's
    ``MockClock(autojump_threshold=0)`` would expire the client's timeouts).
    """

    #: The paths served, and the one that begins the base URL.
    paths: tuple[str, ...] = ()
    prefix = ""

    def __init__(self, script: Script | Iterable[Reply] | None = None) -> None:
        self._queue: deque[Reply] = deque()
        self._script: Script | None = None
        if callable(script):
            self._script = script
        elif script is not None:
            self._queue.extend(script)
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self.calls = 0
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._url: str | None = None

    @property
    def url(self) -> str:
        """The base URL (``http://127.0.0.1:PORT`` and the prefix), once started."""
        if self._url is None:
            raise RuntimeError(f"the {type(self).__name__} is not started")
        return self._url

    def enqueue(self, *replies: Reply) -> None:
        """Answer the next requests with these replies, in order."""
        with self._lock:
            self._queue.extend(replies)

    def start(self) -> Self:
        self._closed.clear()
        server = _Server(("127.0.0.1", 0), _Handler)
        server.fake = self
        self._server = server
        host, port = server.server_address[:2]
        self._url = f"http://{host!s}:{port}{self.prefix}"
        # A short poll: `close` waits for the serving loop to notice, up to one poll.
        self._thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop serving; a hanging request is let go and every connection closes."""
        self._closed.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server.end_connections()
            self._server = None
        if self._thread is not None:
            self._thread.join()  # its loop has stopped: the thread returns at once
            self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _reply_to(self, body: dict[str, Any], headers: dict[str, str]) -> tuple[Reply, int]:
        """The reply to this request, and its number: counted under the lock, as
        ``calls`` goes on while a delayed or scripted reply is made (the ids of a
        reply must be its own, not those of a request that came after it)."""
        with self._lock:
            self.calls += 1
            number = self.calls
            self.requests.append(body)
            self.headers.append(headers)
            if self._queue:
                return self._queue.popleft(), number
            script = self._script
        if script is None:
            name = type(self).__name__
            return ChatReply.failure(500, f"{name}: no reply scripted for this request"), number
        try:
            return script(body), number
        except Exception as exc:  # the script's bug, shown to the client
            failed = f"{type(self).__name__} script failed: {exc!r}"
            return ChatReply.failure(500, failed), number

    def refuse(self, body: dict[str, Any], headers: Mapping[str, str]) -> str | None:
        """Why the real API would answer this request 400, or None."""
        return None

    def render(self, request: Mapping[str, Any], reply: ChatReply, number: int) -> bytes:
        """The body of a successful reply to ``request`` (the ``number``-th)."""
        raise NotImplementedError

    def error_body(self, status: int, message: str, code: str | None) -> bytes:
        """The body of an error answer."""
        raise NotImplementedError


class FakeChatServer(FakeModelServer):
    """An OpenAI-compatible ``POST /v1/chat/completions`` on 127.0.0.1 (``url`` ends
    in ``/v1``); a `FakeModelServer` (see it for the scripting).

    Like the real API it answers 400 to a ``tool`` message that answers no tool
    call of the assistant turn before it (or one already answered), and to an
    assistant turn's tool calls that the tool messages after it do not all answer.
    A request for one of ``reasoning_models`` that sets ``max_tokens`` is answered
    400 with OpenAI's message, as its reasoning models (o1, o3, o4-mini, gpt-5)
    answer it: they read the limit from ``max_completion_tokens`` only.
    """

    paths = ("/v1/chat/completions", "/chat/completions")
    prefix = "/v1"

    def __init__(
        self,
        script: Script | Iterable[Reply] | None = None,
        *,
        reasoning_models: Iterable[str] = (),
    ) -> None:
        super().__init__(script)
        names = (reasoning_models,) if isinstance(reasoning_models, str) else reasoning_models
        self.reasoning_models = frozenset(names)

    def refuse(self, body: dict[str, Any], headers: Mapping[str, str]) -> str | None:
        if not isinstance(body, dict):
            return None
        model = body.get("model")
        if isinstance(model, str) and model in self.reasoning_models and "max_tokens" in body:
            return (
                "Unsupported parameter: 'max_tokens' is not supported with this model. "
                "Use 'max_completion_tokens' instead."
            )
        messages = body.get("messages")
        if not isinstance(messages, list):
            return None
        asked: list[Any] = []  # the calls of the last assistant turn, not yet answered
        in_answers = False  # after an assistant turn with tool calls, among its answers
        for index, message in enumerate([*messages, None]):
            role = message.get("role") if isinstance(message, Mapping) else None
            if role == "tool" and isinstance(message, Mapping):
                call_id = message.get("tool_call_id")
                if not in_answers:
                    return (
                        f"Invalid parameter: messages[{index}]: messages with role 'tool' "
                        "must be a response to a preceeding message with 'tool_calls'."
                    )
                if call_id not in asked:
                    return (
                        f"Invalid parameter: 'tool_call_id' of {call_id!r} not found in "
                        "'tool_calls' of previous message."
                    )
                asked.remove(call_id)
                continue
            if asked:
                return (
                    "An assistant message with 'tool_calls' must be followed by tool "
                    "messages responding to each 'tool_call_id'. The following "
                    f"tool_call_ids did not have response messages: {', '.join(map(str, asked))}"
                )
            calls = message.get("tool_calls") if role == "assistant" else None
            listed = calls if isinstance(calls, list) else []
            asked = [c.get("id") for c in listed if isinstance(c, Mapping)]
            in_answers = bool(asked)
        return None

    def render(self, request: Mapping[str, Any], reply: ChatReply, number: int) -> bytes:
        return _completion(request, reply, number)

    def error_body(self, status: int, message: str, code: str | None) -> bytes:
        return _error_body(message, code)


#: How long `close` waits for a request's thread to end once its connection is ended:
#: a script that never returns is the test's bug, and is not waited on forever.
_HANDLER_JOIN_SECONDS = 5.0


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    request_queue_size = 256
    fake: FakeModelServer

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler]) -> None:
        super().__init__(address, handler)
        self._open: set[socket.socket] = set()
        self._handlers: list[threading.Thread] = []
        self._open_lock = threading.Lock()

    def process_request(self, request: Any, client_address: Any) -> None:
        """Serve ``request`` in a thread of its own, kept (those that ended let go) for
        `end_connections` to wait on."""
        thread = threading.Thread(
            target=self.process_request_thread, args=(request, client_address), daemon=True
        )
        with self._open_lock:
            self._open.add(request)
            self._handlers = [t for t in self._handlers if t.is_alive()]
            self._handlers.append(thread)
        thread.start()

    def shutdown_request(self, request: Any) -> None:
        with self._open_lock:
            self._open.discard(request)
        super().shutdown_request(request)

    def end_connections(self) -> None:
        """End every connection still open: a client's kept-alive one would otherwise
        be answered by a closed server (its thread blocked reading the next request)."""
        with self._open_lock:
            connections = list(self._open)
        for connection in connections:
            try:
                connection.shutdown(socket.SHUT_RDWR)
            except OSError:  # the client left first
                pass
        with self._open_lock:
            handlers = list(self._handlers)
        for thread in handlers:  # each has been let go: it ends, unless a script hangs
            thread.join(_HANDLER_JOIN_SECONDS)

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not self.fake._closed.is_set():  # a connection that `close` ended is no error
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body go out as separate writes: with Nagle's algorithm the body
    # would wait for the client's delayed ACK (40 ms a reply).
    disable_nagle_algorithm = True
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        return

    def do_POST(self) -> None:
        fake = self.server.fake
        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        if self.path.rstrip("/") not in fake.paths:
            self._send(404, fake.error_body(404, f"no route {self.path}", None), {})
            return
        try:
            body = json.loads(raw)
        except ValueError:
            self._send(400, fake.error_body(400, "the request body is not JSON", None), {})
            return
        headers = {k.lower(): v for k, v in self.headers.items()}
        refused = fake.refuse(body, headers)
        if refused is not None:
            self._send(400, fake.error_body(400, refused, None), {})
            return
        reply, number = fake._reply_to(body, headers)
        if not isinstance(reply, ChatReply):
            self.close_connection = True  # what it wrote may not end where HTTP expects
            try:
                reply.play(self.wfile, fake._closed)
            except OSError:  # the client left (a cap, a deadline): that is the point
                pass
            return
        if reply.fault == "hang":
            fake._closed.wait()
            self.close_connection = True
            return
        if reply.delay > 0:
            fake._closed.wait(reply.delay)  # a slow model, that a closing server cuts short
        if reply.status >= 300 or reply.error:  # an error body, whatever the status
            error = fake.error_body(reply.status, reply.error, reply.error_code)
            self._send(reply.status, error, reply.headers)
            return
        data = fake.render(body, reply, number)
        if reply.fault == "drop":
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data[: len(data) // 2])
            self.wfile.flush()
            self.close_connection = True
            return
        self._send(200, data, {})

    def _send(self, status: int, data: bytes, headers: Mapping[str, str]) -> None:
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)


def _error_body(message: str, code: str | None) -> bytes:
    error = {"message": message, "type": "fake_error", "code": code}
    return json.dumps({"error": error}).encode()


def _completion(request: Mapping[str, Any], reply: ChatReply, number: int) -> bytes:
    message: dict[str, Any] = {"role": "assistant", "content": reply.content}
    if reply.reasoning is not None:
        message["reasoning_content"] = reply.reasoning
    if reply.tool_calls:
        message["tool_calls"] = [
            {
                "id": f"call_fake{number}_{i}",
                "type": "function",
                "function": {
                    "name": name,
                    "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments),
                },
            }
            for i, (name, arguments) in enumerate(reply.tool_calls)
        ]
    if reply.usage is not None:
        prompt, completion = reply.usage
    else:
        prompt = len(json.dumps(request.get("messages", ""))) // 4 + 1
        written = len(reply.content or "") + sum(
            len(name) + len(a if isinstance(a, str) else json.dumps(a))
            for name, a in reply.tool_calls
        )
        completion = written // 4 + 1
    body = {
        "id": f"chatcmpl-fake{number}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": request.get("model"),
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if reply.tool_calls else "stop",
            }
        ],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        },
    }
    return json.dumps(body).encode()
