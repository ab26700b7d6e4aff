"""The host names the viewer answers to (its defence against DNS rebinding).

A page on ``attacker.example`` whose name is made to resolve to 127.0.0.1 reaches
the viewer as the same origin as itself; only the ``Host`` header tells such a
request apart. The server answers requests naming these hosts, 400 to the rest.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable

from .._errors import ConfigError

#: The names of this machine's loopback, as a ``Host`` header writes them.
LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "[::1]")

_LABEL = r"[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?"
_NAME = re.compile(rf"{_LABEL}(\.{_LABEL})*")


def host_name(text: str) -> str:
    """``text`` as a ``Host`` header names it (lower case, IPv6 in brackets); a
    `ConfigError` if it is no host name or IP address."""
    name = text.strip().lower().removesuffix(".")
    bare = name.removeprefix("[").removesuffix("]")
    try:
        address = ipaddress.ip_address(bare)
    except ValueError:
        if len(name) <= 253 and _NAME.fullmatch(name):
            return name
        raise ConfigError(
            f"{text!r} is not a host name or IP address (give a name like viewer.example, "
            "without port or wildcard)"
        ) from None
    return f"[{address}]" if address.version == 6 else str(address)


def allowed_hosts(listen: str, extra: Iterable[str] = ()) -> tuple[str, ...]:
    """The loopback names, the address the viewer listens on (unless it is a wildcard),
    and ``extra``: each checked by `host_name`, in that order, without repeats."""
    names = list(LOOPBACK_HOSTS)
    if not _unspecified(listen):  # 0.0.0.0 or ::, every interface: no request names it
        names.append(host_name(listen))
    names += (host_name(e) for e in extra)
    return tuple(dict.fromkeys(names))


def _unspecified(address: str) -> bool:
    try:
        return ipaddress.ip_address(address.strip().strip("[]")).is_unspecified
    except ValueError:
        return False
