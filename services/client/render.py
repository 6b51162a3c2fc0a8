"""Simple Markdown for a terminal: headings, bullets, code, emphasis, links.

ANSI styles only when the output is a TTY and NO_COLOR is unset; otherwise the same
layout in plain text (headings underlined with rules, code indented).
"""

from __future__ import annotations

import os
import re
import shutil
import textwrap
from typing import IO

RESET = "\x1b[0m"
BOLD = "\x1b[1m"
DIM = "\x1b[2m"
UNDERLINE = "\x1b[4m"
CYAN = "\x1b[36m"
GREEN = "\x1b[32m"
YELLOW = "\x1b[33m"
RED = "\x1b[31m"

_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_BULLET = re.compile(r"^(\s*)[-*+]\s+(.*)$")
_NUMBERED = re.compile(r"^(\s*)(\d+)[.)]\s+(.*)$")
_FENCE = re.compile(r"^\s*(```|~~~)")
_RULE = re.compile(r"^\s*([-*_])(\s*\1){2,}\s*$")
_CODE = re.compile(r"`([^`]+)`")
_BOLD = re.compile(r"\*\*(.+?)\*\*|__(.+?)__")
_ITALIC = re.compile(r"(?<![\w*])\*(?!\s)(.+?)(?<!\s)\*(?![\w*])|(?<![\w_])_(?!\s)(.+?)(?<!\s)_(?![\w_])")
_LINK = re.compile(r"\[([^\]]+)\]\((\S+?)\)")


def use_color(stream: IO[str]) -> bool:
    """ANSI for a TTY when NO_COLOR is unset (https://no-color.org)."""
    if "NO_COLOR" in os.environ:
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


class Style:
    """Wraps text in ANSI codes, or leaves it alone."""

    def __init__(self, color: bool) -> None:
        self.color = color

    def __call__(self, text: str, *codes: str) -> str:
        if not self.color or not codes or not text:
            return text
        return "".join(codes) + text + RESET


def inline(text: str, style: Style) -> str:
    """Code spans, bold, italics and links within one line."""
    spans: list[str] = []

    def keep(match: re.Match[str]) -> str:  # code spans are shielded from emphasis
        spans.append(style(match.group(1), CYAN) if style.color else match.group(1))
        return f"\x00{len(spans) - 1}\x00"

    text = _CODE.sub(keep, text)
    text = _LINK.sub(lambda m: f"{style(m.group(1), UNDERLINE)} <{m.group(2)}>", text)
    text = _BOLD.sub(lambda m: style(m.group(1) or m.group(2), BOLD), text)
    text = _ITALIC.sub(lambda m: style(m.group(1) or m.group(2), DIM) if style.color else (m.group(1) or m.group(2)), text)
    return re.sub(r"\x00(\d+)\x00", lambda m: spans[int(m.group(1))], text)


def render_markdown(text: str, *, color: bool = False, width: int | None = None) -> str:
    """`text` laid out for a terminal `width` columns wide."""
    width = width or min(shutil.get_terminal_size((100, 24)).columns, 120)
    style = Style(color)
    out: list[str] = []
    in_code = False
    for raw in text.replace("\r\n", "\n").split("\n"):
        line = raw.rstrip()
        if _FENCE.match(line):
            in_code = not in_code
            continue
        if in_code:
            out.append(style("    " + line, CYAN) if line else "")
            continue
        heading = _HEADING.match(line)
        if heading:
            level, title = len(heading.group(1)), inline(heading.group(2), style)
            if out and out[-1] != "":
                out.append("")
            if color:
                out.append(style(title, BOLD, UNDERLINE) if level <= 3 else style(title, BOLD))
            else:
                out.append(title)
                out.append(("=" if level <= 2 else "-") * min(len(heading.group(2)), width))
            continue
        if _RULE.match(line):
            out.append(style("─" * min(width, 40), DIM) if color else "-" * min(width, 40))
            continue
        bullet = _BULLET.match(line)
        numbered = _NUMBERED.match(line)
        if bullet or numbered:
            indent = len((bullet or numbered).group(1)) // 2 * 2  # type: ignore[union-attr]
            marker = "•" if bullet else f"{numbered.group(2)}."  # type: ignore[union-attr]
            body = bullet.group(2) if bullet else numbered.group(3)  # type: ignore[union-attr]
            lead = " " * (indent + 2) + marker + " "
            out.extend(_wrap(inline(body, style), width, lead, " " * len(lead)))
            continue
        if line.startswith(">"):
            quoted = inline(line.lstrip("> "), style)
            out.extend(_wrap(quoted, width, "  │ ", "  │ "))
            continue
        if raw.startswith(("    ", "\t")):
            out.append(style("    " + raw.strip(), CYAN))
            continue
        if not line:
            if out and out[-1] != "":
                out.append("")
            continue
        out.extend(_wrap(inline(line, style), width, "", ""))
    while out and out[-1] == "":
        out.pop()
    return "\n".join(out)


def _wrap(text: str, width: int, first: str, rest: str) -> list[str]:
    if "\x1b" in text:  # escape codes confuse the width count: keep the line whole
        return [first + text]
    return textwrap.wrap(text, width, initial_indent=first, subsequent_indent=rest, break_on_hyphens=False) or [first]


_CLAUSES = re.compile(
    r"\s+(?=(?:OPTIONAL\s+MATCH|MATCH|WHERE|WITH|UNWIND|RETURN|ORDER\s+BY|SKIP|LIMIT|CALL|YIELD|UNION)\b)",
    re.IGNORECASE,
)


def format_cypher(query: str) -> list[str]:
    """A Cypher query as lines, one clause each (string literals are left whole)."""
    parts: list[str] = []
    for piece in re.split(r"('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")", " ".join(query.split())):
        if piece.startswith(("'", '"')):
            parts.append(piece)
        else:
            parts.append(_CLAUSES.sub("\n", piece))
    return [line.strip() for line in "".join(parts).split("\n") if line.strip()]
