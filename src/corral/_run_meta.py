"""What a run records about itself beside its figures: the user's tags and note, and
where it came from (Corral's version, the benchmark file and its git commit).

A tag is a short label to find runs by (``corral list --tag``); a note is free text
for whoever reads the report later. Both are checked before anything runs.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ._errors import ConfigError
from ._types import BenchmarkTaskMetadata

MAX_TAG_CHARS = 100
MAX_TAGS = 50
MAX_NOTE_CHARS = 10_000


def check_tags(tags: object) -> tuple[str, ...]:
    """The run's tags in the order given, repeats dropped; `ConfigError` names a bad one.

    A tag is 1..100 printable characters without spaces at either end (so it reads
    the same in a table, a URL and a shell)."""
    if isinstance(tags, str) or not isinstance(tags, Iterable):
        raise ConfigError(f"tags must be a list of strings, not {tags!r}")
    seen: dict[str, None] = {}
    for tag in tags:
        if not isinstance(tag, str) or not tag or not tag.isprintable() or tag != tag.strip():
            raise ConfigError(
                f"a tag is 1 to {MAX_TAG_CHARS} printable characters with no space at "
                f"either end, not {tag!r}"
            )
        if len(tag) > MAX_TAG_CHARS:
            raise ConfigError(
                f"tag {tag[:40]!r}... is {len(tag)} characters; at most {MAX_TAG_CHARS}"
            )
        seen[tag] = None
    if len(seen) > MAX_TAGS:
        raise ConfigError(f"{len(seen)} tags given; a run takes at most {MAX_TAGS}")
    return tuple(seen)


def check_note(note: object) -> str | None:
    """The run's note (None: none); `ConfigError` unless text of at most 10,000 characters."""
    if note is None:
        return None
    if not isinstance(note, str):
        raise ConfigError(f"note must be text, not {note!r}")
    if len(note) > MAX_NOTE_CHARS:
        raise ConfigError(f"note is {len(note):,} characters; at most {MAX_NOTE_CHARS:,}")
    return note


def check_source(source: object) -> Path | None:
    """The benchmark file a run came from (None: not from a file)."""
    if source is None:
        return None
    if not isinstance(source, str | os.PathLike) or not os.fspath(source):
        raise ConfigError(f"source must be the benchmark's file path, not {source!r}")
    return Path(source)


def provenance(source: Path | None) -> dict[str, str]:
    """Corral's version and, for a benchmark file, its path and the git commit of the
    repository it is in (``+dirty`` when the file differs from that commit).

    Read once per run; a file outside a repository, or no ``git``, gives no commit."""
    from . import __version__

    found = {"corral_version": __version__}
    if source is None:
        return found
    path = source.resolve()
    found["benchmark_file"] = str(path)
    commit = _git(path.parent, "rev-parse", "HEAD")
    if commit:
        dirty = _git(path.parent, "status", "--porcelain", "--", path.name)
        found["git_commit"] = commit + ("+dirty" if dirty else "")
    return found


def _git(where: Path, *args: str) -> str:
    try:
        done = subprocess.run(
            ["git", "-C", str(where), *args],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


def shown_provenance(found: Mapping[str, str]) -> str:
    """One line for the report: ``corral 0.1.0 · bench.py @ 1a2b3c4d (+dirty)``."""
    parts = [f"corral {found['corral_version']}"] if "corral_version" in found else []
    if "benchmark_file" in found:
        file = Path(found["benchmark_file"]).name
        commit = found.get("git_commit")
        parts.append(
            f"{file} @ {commit[:12]}{' (dirty)' * commit.endswith('+dirty')}" if commit else file
        )
    return " · ".join(parts)


@dataclass(frozen=True, slots=True)
class RunMeta:
    """A run's tags, note and provenance, checked (`check_tags`, `check_note`)."""

    tags: tuple[str, ...] = ()
    note: str | None = None
    provenance: Mapping[str, str] = field(default_factory=dict)
    #: Each agent's generation settings, by agent id (`generation_of`).
    generation: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    @classmethod
    def of(cls, tags: object, note: object, source: object) -> RunMeta:
        """Checked before anything runs; the provenance (a ``git`` call) is read by `read`."""
        path = check_source(source)
        return cls(
            check_tags(tags), check_note(note), {"benchmark_file": str(path)} if path else {}
        )

    def read(self) -> RunMeta:
        """With its provenance read (Corral's version; the file's git commit)."""
        file = self.provenance.get("benchmark_file")
        return replace(self, provenance=provenance(None if file is None else Path(file)))


def generation_of(
    agents: Mapping[str, object], tasks: Iterable[BenchmarkTaskMetadata] = ()
) -> dict[str, dict[str, Any]]:
    """Each agent's generation settings (the model it calls, temperature, ...), by agent
    id, from an agent's ``generation_settings()`` (`corral.agents.ToolAgent` has one);
    agents without one are left out. Settings that are not a JSON object are a
    `ConfigError` naming the agent, before the run starts.

    A task that names its model is run on it (the agent is asked with
    ``session.model``, and the report counts the trial under it): an agent's
    ``model`` is the models its ``tasks`` name (its own where a task names none),
    joined by ", ", not the one its client would call by default; where it names none
    of its own, the models its tasks name, when every task names one."""
    named: dict[str, set[str | None]] | None = None  # made for the first agent with a hook
    found: dict[str, dict[str, Any]] = {}
    for agent_id, agent in agents.items():
        hook = getattr(agent, "generation_settings", None)
        if not callable(hook):
            continue
        if named is None:
            named = {}
            for meta in tasks:
                named.setdefault(meta.agent_id, set()).add(meta.model)
        settings = hook()
        try:
            if not isinstance(settings, Mapping):
                raise TypeError(f"{type(settings).__name__}, not a mapping")
            found[agent_id] = json.loads(json.dumps(dict(settings), allow_nan=False))
        except (TypeError, ValueError) as exc:
            raise ConfigError(
                f"agent {agent_id!r}: generation_settings() must give a JSON object ({exc})"
            ) from None
        called = _called(found[agent_id].get("model"), named.get(agent_id, set()))
        if called is not None:
            found[agent_id]["model"] = called
    return found


def _called(own: object, named: set[str | None]) -> str | None:
    """The models an agent's tasks ran on (``None`` in ``named``: a task on ``own``),
    joined; None if no task ran, or one ran on its own model and it names none."""
    if own is not None and not isinstance(own, str):
        return None  # the agent's own record of its model, kept as it gave it
    models = {own if model is None else model for model in named}
    if not models or None in models:
        return None
    return ", ".join(sorted(m for m in models if m is not None))


def shown_generation(generation: Mapping[str, Mapping[str, Any]]) -> str:
    """One line per agent: ``agent: gpt-x (temperature 0.8, max_tokens 512)``."""
    lines = []
    for agent, settings in generation.items():
        rest = ", ".join(f"{k} {v}" for k, v in settings.items() if k != "model")
        model = settings.get("model", "?")
        lines.append(f"{agent}: {model}" + (f" ({rest})" if rest else ""))
    return "\n".join(lines)
