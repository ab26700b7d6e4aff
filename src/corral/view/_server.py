"""The viewer's web app (Starlette): a page shell, its static files, and a read-only JSON API.

Only the routes below exist: every other path is a 404, every method but GET and
HEAD a 405, and no URL ever names a file (the static files are looked up by
exact name), so no path can reach outside them. The store is opened read-only.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from contextlib import asynccontextmanager
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from .._checks import non_negative_number
from .._errors import ConfigError
from ..store import CommitStore
from ..store._heads import HeadStore
from . import _pages
from ._assets import asset, shell, to_json
from ._cache import Loaded, LoadFailed, ViewCache
from ._compare import compare
from ._hosts import LOOPBACK_HOSTS
from ._index import TrialQuery

#: Served pages run only the viewer's own script and style, talk only to this server,
#: and cannot be framed; data is never markup, so nothing inline is ever needed.
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}

Handler = Callable[[Request, ViewCache], Awaitable[Any]]


def _host_names(value: object) -> tuple[str, ...]:
    """``allowed_hosts`` as a tuple of names, else a `ConfigError` naming it: a string
    would be its letters, none a host, and every request refused with a 400."""
    names = () if isinstance(value, str) or not isinstance(value, Iterable) else tuple(value)
    if not names or not all(isinstance(name, str) for name in names):
        raise ConfigError(f"allowed_hosts must be a list of host names, not {value!r}")
    return names


def create_app(
    store: CommitStore, *, refresh: float = 2.0, allowed_hosts: Sequence[str] = LOOPBACK_HOSTS
) -> Starlette:
    """The viewer over ``store`` (open it read-only: the viewer never writes).

    The store is held open, and benchmarks load in the background, for the app's lifespan.
    Only requests whose ``Host`` is one of ``allowed_hosts`` (lower case, IPv6 in brackets) are
    answered, the rest with 400: a rebound DNS name reads nothing, and a redirect (of
    a trailing slash) goes only to a host the viewer was started for.
    """
    non_negative_number("refresh", refresh)
    names = _host_names(allowed_hosts)
    holder: dict[str, ViewCache] = {}

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with store.opened(), anyio.create_task_group() as tg:
            holder["cache"] = ViewCache(store, tg, refresh=refresh)
            yield
            tg.cancel_scope.cancel()

    def api(handler: Handler) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            try:
                body = await handler(request, holder["cache"])
            except ConfigError as exc:
                return _json({"error": str(exc)}, 400)
            except LoadFailed as exc:
                return _json({"error": str(exc)}, 500)
            return _json(body)

        return endpoint

    async def page(request: Request) -> Response:
        return Response(shell(), media_type="text/html; charset=utf-8", headers=HEADERS)

    def static(name: str) -> Callable[[Request], Awaitable[Response]]:
        body, media_type = asset(name)

        async def endpoint(request: Request) -> Response:
            return Response(body, media_type=media_type, headers=HEADERS)

        return endpoint

    routes = [
        Route("/", page),
        Route("/static/charts.js", static("charts.js")),
        Route("/static/app.js", static("app.js")),
        Route("/static/app.css", static("app.css")),
        Route("/api/benchmarks", api(_benchmarks)),
        Route("/api/benchmark", api(_summary)),
        Route("/api/trials", api(_trials)),
        Route("/api/task", api(_task)),
        Route("/api/trial", api(_trial)),
        Route("/api/commit", api(_commit)),
        Route("/api/compare", api(_compare)),
        Route("/api/version", api(_version)),
    ]
    hosts = Middleware(
        TrustedHostMiddleware, allowed_hosts=[str(n) for n in names], www_redirect=False
    )
    return Starlette(routes=routes, lifespan=lifespan, middleware=[hosts])


def _json(body: Any, status: int = 200) -> Response:
    return Response(to_json(body), status, headers=HEADERS, media_type="application/json")


def _param(request: Request, name: str) -> str:
    value = request.query_params.get(name)
    if not value:
        raise ConfigError(f"missing parameter {name!r}")
    return value


async def _ready(cache: ViewCache, benchmark_id: str) -> Loaded:
    loaded = await cache.get(benchmark_id)
    await loaded.ready()
    return loaded


async def _benchmarks(request: Request, cache: ViewCache) -> Any:
    # Polled every few seconds: from a store that keeps heads, each benchmark's counts
    # without decoding its configuration (as `corral list`), its finished trials as its
    # report counts them.
    store = cache.store
    overview = await store.overview() if isinstance(store, HeadStore) else None
    out = []
    if overview is not None:
        for b in overview:
            brief = await cache.brief(b.benchmark_id)  # starts loading the ones not loaded yet
            assert isinstance(store, HeadStore)
            finished = await store.finished_trials(b.benchmark_id, b.trials_per_task)
            total = b.tasks * b.trials_per_task
            out.append(_pages.benchmark_entry(b.benchmark_id, b.created_at, total, finished, brief))
        return {"benchmarks": out}
    for info in await store.benchmarks():
        brief = await cache.brief(info.benchmark_id)
        finished = info.finished if brief.finished is None else brief.finished
        out.append(
            _pages.benchmark_entry(info.benchmark_id, info.created_at, info.trials, finished, brief)
        )
    return {"benchmarks": out}


async def _summary(request: Request, cache: ViewCache) -> Any:
    benchmark_id = _param(request, "id")
    if request.query_params.get("wait") == "1":  # a long poll: answer once read in full
        return _pages.summary(await cache.newest(benchmark_id))
    return _pages.summary(await cache.get(benchmark_id))


async def _trials(request: Request, cache: ViewCache) -> Any:
    query = TrialQuery.from_params(request.query_params)
    loaded = await cache.get(_param(request, "id"))
    if query.plain:  # the store's order: the page is there once enough rows are
        await loaded.at_least((query.page + 1) * query.size)
        if loaded.failure is not None:
            await loaded.ready()
    else:
        await loaded.ready()
    return _pages.trials(loaded, query)


async def _task(request: Request, cache: ViewCache) -> Any:
    loaded = await _ready(cache, _param(request, "id"))
    return await _pages.task_page(cache.store, loaded, _param(request, "task"))


def _int(request: Request, name: str) -> int:
    text = _param(request, name)
    try:
        return int(text)
    except ValueError:
        raise ConfigError(f"{name}: {text!r} is not an integer") from None


async def _trial(request: Request, cache: ViewCache) -> Any:
    loaded = await _ready(cache, _param(request, "id"))
    trial = _int(request, "trial")
    query = TrialQuery.from_params(request.query_params)
    return await _pages.trial_page(cache.store, loaded, _param(request, "task"), trial, query)


async def _commit(request: Request, cache: ViewCache) -> Any:
    """One commit as stored: what the timeline summarises (a model call's payload)."""
    loaded = await _ready(cache, _param(request, "id"))
    task, trial, seq = _param(request, "task"), _int(request, "trial"), _int(request, "seq")
    return await _pages.commit_page(cache.store, loaded, task, trial, seq)


async def _compare(request: Request, cache: ViewCache) -> Any:
    a = await _ready(cache, _param(request, "a"))
    b = await _ready(cache, _param(request, "b"))
    ma, mb = request.query_params.get("ma"), request.query_params.get("mb")
    if bool(ma) != bool(mb):
        raise ConfigError("comparing models needs both ma (A's model) and mb (B's model)")
    return compare(a, b, (ma, mb) if ma and mb else None)


async def _version(request: Request, cache: ViewCache) -> Any:
    """Which load of the benchmark is served (a page polls it to redraw when it changes)."""
    return await cache.version(_param(request, "id"))
