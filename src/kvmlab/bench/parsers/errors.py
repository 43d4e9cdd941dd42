"""The error every parser raises when a tool's output holds no usable result."""

from __future__ import annotations

from kvmlab.errors import KvmlabError

_EXCERPT_LINES = 3
_EXCERPT_WIDTH = 160


def excerpt(output: str) -> list[str]:
    """The first and last few non-empty lines of ``output``, long lines shortened."""
    lines = [line.rstrip() for line in output.splitlines() if line.strip()]
    lines = [
        line if len(line) <= _EXCERPT_WIDTH else line[: _EXCERPT_WIDTH - 3] + "..."
        for line in lines
    ]
    if len(lines) <= 2 * _EXCERPT_LINES:
        return lines
    skipped = len(lines) - 2 * _EXCERPT_LINES
    return [*lines[:_EXCERPT_LINES], f"[... {skipped} lines ...]", *lines[-_EXCERPT_LINES:]]


class ParseError(KvmlabError):
    """A benchmark tool's output is an error report, is truncated, or is not its output.

    ``tool`` names the tool, ``excerpt`` holds a few lines of the output so the
    user sees what the tool said without opening a log.
    """

    exit_code = 3

    def __init__(self, tool: str, message: str, output: str = "") -> None:
        self.tool = tool
        self.excerpt = excerpt(output)
        super().__init__(f"{tool}: {message}")

    def lines(self) -> list[str]:
        return [str(self), *(f"  | {line}" for line in self.excerpt)]
