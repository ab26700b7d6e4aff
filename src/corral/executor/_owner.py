"""The thread that starts (or joins) Ray for a `RayExecutor`, alive until it is stopped.

Ray ties the processes it starts to the thread that started them (Linux's
``PR_SET_PDEATHSIG`` fires when that *thread* ends). `RayExecutor.connect` runs
in one of anyio's worker threads, which end when their event loop closes (or
when one has idled 10 s and the loop next uses a thread): a Ray started there
had its GCS and raylet killed as the run ended, so the next run in the process
found it dead, and its agents lingered for a minute. So ``ray.init`` runs on a
thread of its own, which waits until `RayOwner.stop` has shut that Ray down.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import types
from collections.abc import Iterator
from typing import Any

from .._errors import ConfigError


def import_ray() -> types.ModuleType:
    try:
        import ray
    except ImportError as exc:
        raise ConfigError("the Ray executor needs Ray: pip install 'corral[ray]'") from exc
    return ray


#: How long a call Ray could not deliver for the moment waits before it goes again.
UNREACHABLE_AGAIN = 1.0


def unreachable_errors(ray: types.ModuleType) -> tuple[type[BaseException], ...]:
    """What Ray raises for an actor it cannot reach for the moment (a partition, a node
    not yet declared dead), which may still be running the call: older Rays have none."""
    unavailable = getattr(ray.exceptions, "ActorUnavailableError", None)
    return (unavailable,) if unavailable else ()


def actor_class(ray: types.ModuleType, cls: type, options: dict[str, Any]) -> Any:
    """``ray.remote(cls).options(**options)``, its calls kept out of Ray's task events
    unless ``options`` say otherwise: a run's long polls and scope calls would flood
    Ray's task list, and recording them costs about a tenth of each call's CPU on either
    side. Rays older than the option (2.9, 2.10) record them."""
    remote = ray.remote(cls)
    try:
        return remote.options(**{"enable_task_events": False, **options})
    except ValueError:  # an option this Ray does not know (or a bad one: raised again)
        return remote.options(**options)


class RayOwner:
    def __init__(self) -> None:
        self._thread: threading.Thread | None = None
        self._release = threading.Event()
        #: Whether ``ray.init`` started a local Ray (rather than joining one).
        self.started = False

    def init(self, ray: types.ModuleType, timeout: float | None, **options: Any) -> None:
        """``ray.init(**options)`` on the owner thread; returns (or raises) as it does, or
        raises `TimeoutError` after ``timeout`` seconds (it goes on trying in the
        background: Ray offers no way to stop it)."""
        inited = threading.Event()
        failure: list[BaseException] = []

        def own() -> None:
            try:
                ray.init(**options)
            except BaseException as exc:  # raised again by the caller
                failure.append(exc)
                return
            finally:
                inited.set()
            self._release.wait()

        self._release.clear()
        self._thread = threading.Thread(target=own, name="corral-ray-owner", daemon=True)
        self._thread.start()
        if not inited.wait(timeout):
            self._thread = None  # a daemon: it ends with the process, if not before
            raise TimeoutError
        if failure:
            self._thread = None
            raise failure[0]
        self.started = _started_here(ray)

    def stop(self) -> None:
        """Shut down the local Ray `init` started, once its processes have exited (Ray's
        own exit hook does not wait for them); then let the owner thread end."""
        if self.started:
            import ray

            with _ctrl_c_deferred():
                ray.shutdown(wait_for_processes=True)
            self.started = False
        if self._thread is not None:
            self._release.set()
            self._thread.join()
            self._thread = None


@contextlib.contextmanager
def _ctrl_c_deferred() -> Iterator[None]:
    """Ctrl-C waits until the block is done, then goes to the handler it would have gone
    to: a Ray shutdown cut short leaves its core worker half torn down, and the
    interpreter crashes (SIGSEGV) as it exits."""
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread gets signals
        return
    pressed: list[Any] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: pressed.append(frame))
    try:
        yield
    finally:  # None: a handler not set from Python (none to restore but the default)
        signal.signal(signal.SIGINT, signal.SIG_DFL if previous is None else previous)
    if pressed and callable(previous):
        previous(signal.SIGINT, pressed[0])


def _started_here(ray: types.ModuleType) -> bool:
    """Whether ``ray.init`` started the processes of a local Ray (it may have joined one
    that ``RAY_ADDRESS`` or ``ray start`` named)."""
    node = getattr(ray._private.worker, "_global_node", None)
    return bool(getattr(node, "all_processes", None))
