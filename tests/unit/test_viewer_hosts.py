"""DNS rebinding: the viewer answers only requests that name a host it was started for
(loopback names, ``--host``, ``--allow-host``), over real HTTP on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from bench.viewer_stores import serving

from corral import ConfigError
from corral.cli import main
from corral.view._hosts import LOOPBACK_HOSTS, allowed_hosts

from ..support.viewer_stores import hostile_run


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("hosts") / "store.db"
    hostile_run(path)
    return path


@pytest.fixture(scope="module")
def url(store: Path) -> Iterator[str]:
    with serving(store, "--allow-host", "Viewer.Internal") as url:
        yield url


def _get(url: str, path: str, host: str) -> httpx.Response:
    port = httpx.URL(url).port
    with httpx.Client(base_url=url, timeout=30) as http:
        return http.get(path, headers={"Host": f"{host}:{port}"})


@pytest.mark.parametrize("path", ["/api/benchmarks", "/", "/static/app.js", "/api/benchmarks/"])
def test_another_host_is_refused_and_never_redirected_to(url: str, path: str) -> None:
    response = _get(url, path, "attacker.example")
    assert response.status_code == 400, response.text
    assert "location" not in response.headers
    assert "hostile" not in response.text


@pytest.mark.parametrize(
    "host", ["127.0.0.1", "localhost", "LOCALHOST", "[::1]", "viewer.internal"]
)
def test_loopback_names_and_allowed_hosts_are_answered(url: str, host: str) -> None:
    response = _get(url, "/api/benchmarks", host)
    assert response.status_code == 200, response.text
    assert [b["benchmark_id"] for b in response.json()["benchmarks"]] == ["hostile"]


def test_a_redirect_stays_on_the_host_asked_for(url: str) -> None:
    response = _get(url, "/api/benchmarks/", "localhost")
    location = response.headers.get("location", "")
    assert response.status_code in (307, 308), response.text
    assert location.startswith(("/", f"http://localhost:{httpx.URL(url).port}/")), location


@pytest.mark.parametrize("bad", ["*", "a b", "host:80", "*.example.com", ""])
def test_a_bad_allowed_host_is_refused_naming_it(
    bad: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main.main(["view", "--allow-host", bad, "--port", "0"], standalone_mode=False)
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and repr(bad) in err[0], err


def test_host_adds_its_own_name_unless_it_listens_everywhere() -> None:
    assert allowed_hosts("127.0.0.1") == LOOPBACK_HOSTS
    assert allowed_hosts("::1", ["Box.Lan."]) == (*LOOPBACK_HOSTS, "box.lan")
    assert allowed_hosts("10.0.0.5") == (*LOOPBACK_HOSTS, "10.0.0.5")
    assert allowed_hosts("fe80::1") == (*LOOPBACK_HOSTS, "[fe80::1]")
    assert allowed_hosts("0.0.0.0") == allowed_hosts("::") == LOOPBACK_HOSTS


@pytest.mark.parametrize(
    ("keywords", "named"),
    [
        ({"allowed_hosts": "localhost"}, "allowed_hosts must be a list of host names"),
        ({"allowed_hosts": ["localhost", 3]}, "allowed_hosts must be a list of host names"),
        ({"allowed_hosts": 3}, "allowed_hosts must be a list of host names"),
        ({"refresh": "2"}, "refresh must be a non-negative number, not '2'"),
        ({"refresh": -1}, "refresh must be a non-negative number, not -1"),
    ],
    ids=["text", "number-in-list", "number", "refresh-text", "refresh-negative"],
)
def test_create_app_refuses_bad_settings_by_name(keywords: dict[str, object], named: str) -> None:
    """`allowed_hosts="localhost"` was taken as the hosts "l", "o", "c", ...: every
    request was then a 400; a refresh of "2" or -1 was taken as it was, unchecked."""
    pytest.importorskip("starlette")
    from corral import MemoryStore
    from corral.view import create_app

    with pytest.raises(ConfigError, match=named):
        create_app(MemoryStore(), **keywords)  # type: ignore[arg-type]
