"""Printing untrusted text to a terminal: control characters shown, never obeyed.

Errors, tool names and values come from agents, environments and model servers.
Printed raw, ``\\x1b]52;...`` writes the clipboard, ``\\x1b[2J`` clears the screen,
``\\r`` or a bidi override disguises a line, and ``[link=...]`` becomes rich markup.
`clean` escapes the characters; `SafeConsole` applies it to everything it prints
and parses no markup unless a call asks for it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from rich.console import Console, ConsoleOptions, RenderableType
from rich.segment import Segment
from rich.text import Text

#: C0 but newline and tab, DEL, C1, the bidi controls (marks, embeddings, overrides,
#: isolates) and the line and paragraph separators.
_CONTROL = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]"
)
#: The same, newline and tab included, for text that must stay on one line.
_CONTROL_OR_BREAK = re.compile(f"[\n\t]|{_CONTROL.pattern}")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def clean(text: str, *, one_line: bool = False) -> str:
    """``text`` with each control character written as its escape (``\\x1b``,
    ``\\u202e``); newlines and tabs kept unless ``one_line``."""
    return (_CONTROL_OR_BREAK if one_line else _CONTROL).sub(_escape, text)


class SafeConsole(Console):
    """A rich console for output that may hold untrusted text.

    Strings are printed without markup (``print(..., markup=True)`` asks for it, for
    text of Corral's own) and with control characters escaped; so is the text of
    every other renderable (`rich.text.Text`, tables), as it is rendered. Escape
    sequences rich makes for its own styles and cursor moves are untouched.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("markup", False)
        super().__init__(*args, **kwargs)

    def render_str(self, text: str, **kwargs: Any) -> Text:
        # Before layout, so that tables measure the escaped text.
        return super().render_str(clean(text), **kwargs)

    def render(
        self, renderable: RenderableType, options: ConsoleOptions | None = None
    ) -> Iterable[Segment]:
        if isinstance(renderable, Text) and _CONTROL.search(renderable.plain):
            renderable = self._clean_text(renderable)  # before it is wrapped to its width
        # A last line of defence for text of other renderables.
        for segment in super().render(renderable, options):
            if segment.control is None and _CONTROL.search(segment.text):
                yield Segment(clean(segment.text), segment.style)
            else:
                yield segment

    def _clean_text(self, text: Text) -> Text:
        """``text`` with its control characters escaped, each escape in the character's style."""
        out = text.blank_copy()
        end = 0
        for match in _CONTROL.finditer(text.plain):
            out.append_text(text[end : match.start()])
            out.append(
                _escape(match), self.get_style(text.get_style_at_offset(self, match.start()))
            )
            end = match.end()
        out.append_text(text[end:])
        return out
