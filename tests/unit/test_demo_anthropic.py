"""`corral demo --provider anthropic`: the demo over Anthropic's Messages API, on the
local scripted server or on an endpoint given with --model (`FakeAnthropicServer`
here, real HTTP on 127.0.0.1), with ANTHROPIC_API_KEY as ``x-api-key``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import corral
from corral.cli import main
from corral.demo import build_demo
from corral.models import Anthropic
from corral.testing import ChatReply, FakeAnthropicServer


def demo(tmp_path: Path, *extra: str) -> Any:
    args = ["demo", "--fast", "--no-progress", "--store", str(tmp_path / "s.db")]
    return CliRunner().invoke(main, [*args, "--provider", "anthropic", *extra])


@pytest.mark.slow  # the whole demo (84 trials): a system test, as test_cli's
def test_the_local_demo_speaks_the_messages_api(tmp_path: Path) -> None:
    result = demo(tmp_path)
    assert result.exit_code == 0, result.output
    assert "over Anthropic's Messages API" in result.output
    assert "/v1/messages" in result.output  # the content filter's refusals name it
    assert "completed" in result.output


def test_a_model_on_an_endpoint_gets_the_key_and_the_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-demo")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-not-this-one")
    with FakeAnthropicServer(lambda body: ChatReply.text("The answer is 42.")) as server:
        result = demo(tmp_path, "--base-url", server.url, "--model", "claude-x")
    assert result.exit_code == 0, result.output
    assert result.output.startswith(f"checking {server.url} …")
    assert server.calls > 12 and {r["model"] for r in server.requests} == {"claude-x"}
    assert {h.get("x-api-key") for h in server.headers} == {"sk-ant-demo"}
    assert all("authorization" not in h for h in server.headers)
    assert all(h.get("anthropic-version") for h in server.headers)


def test_without_a_base_url_the_model_is_anthropics(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    refused = ChatReply.failure(401, "invalid x-api-key")
    with FakeAnthropicServer(lambda body: refused) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        result = demo(tmp_path, "--model", "claude-x")
    assert result.exit_code == 2 and server.calls == 1
    assert f"checking {server.url} …" in result.output and "invalid x-api-key" in result.output
    monkeypatch.delenv("ANTHROPIC_BASE_URL")
    benchmark = build_demo(None, 0.0, models=["claude-x"], provider="anthropic")
    (agent,) = benchmark.agents.values()
    model = agent.model  # type: ignore[attr-defined]
    assert isinstance(model, Anthropic) and model.url == "https://api.anthropic.com/v1/messages"


def test_model_options_that_do_not_go_together_are_refused(tmp_path: Path) -> None:
    no_url = CliRunner().invoke(main, ["demo", "--model", "m"])
    assert no_url.exit_code == 2 and "--provider anthropic" in no_url.output
    no_model = demo(tmp_path, "--base-url", "http://127.0.0.1:9")
    assert no_model.exit_code == 2 and "give --base-url and --model together" in no_model.output
    unknown = CliRunner().invoke(main, ["demo", "--provider", "gemini"])
    assert unknown.exit_code == 2 and "'gemini' is not one of" in unknown.output
    with pytest.raises(corral.ConfigError, match="unknown provider 'gemini'"):
        build_demo(None, provider="gemini")
