"""Helpers shared by the parsers: typed access to JSON and text, failing as ParseError."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass

from kvmlab.bench.parsers.errors import ParseError

NUMBER = r"\d+(?:\.\d+)?"
"""A non-negative decimal, as the tools print it (no exponent, no sign)."""

_NUMBER_RE = re.compile(NUMBER)
_JSON_START = re.compile(r"^[ \t]*\{", re.MULTILINE)


@dataclass(frozen=True)
class Source:
    """The output of one tool run, with accessors that raise :class:`ParseError`."""

    tool: str
    text: str

    def error(self, message: str) -> ParseError:
        """A ParseError for this output (to ``raise``)."""
        return ParseError(self.tool, message, self.text)

    def json_object(self, complaint: re.Pattern[str] | None = None) -> Mapping[str, object]:
        """The first JSON object in the output; lines printed before it are skipped.

        Without any JSON, the first match of ``complaint`` (the tool's own error
        line, group 1 its message) becomes the error message.
        """
        start = _JSON_START.search(self.text)
        if start is None:
            said = complaint.search(self.text) if complaint else None
            raise self.error(said.group(1) if said else "the output holds no JSON object")
        try:
            doc, _ = json.JSONDecoder().raw_decode(self.text, start.end() - 1)
        except json.JSONDecodeError as exc:
            raise self.error(f"invalid JSON ({exc.msg}, line {exc.lineno})") from exc
        return self.mapping(doc)

    def at(self, obj: object, *path: str) -> object:
        """``obj[path[0]][path[1]]...``; a missing key names the whole path."""
        for i, key in enumerate(path):
            if not isinstance(obj, Mapping) or key not in obj:
                raise self.error(f"no '{'.'.join(path[: i + 1])}' in the output")
            obj = obj[key]
        return obj

    def mapping(self, obj: object, *path: str) -> Mapping[str, object]:
        """The JSON object at ``path``."""
        value = self.at(obj, *path)
        if not isinstance(value, Mapping):
            raise self.error(f"'{'.'.join(path) or 'document'}' is not a JSON object")
        return value

    def number(self, obj: object, *path: str) -> float:
        """The number at ``path`` (JSON booleans are not numbers)."""
        value = self.at(obj, *path)
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.error(f"'{'.'.join(path)}' is not a number: {value!r}")
        if not math.isfinite(value):
            raise self.error(f"'{'.'.join(path)}' is not a finite number: {value!r}")
        return float(value)

    def search(self, pattern: re.Pattern[str], what: str) -> re.Match[str]:
        """The first match of ``pattern``; ``what`` names the missing thing in the error."""
        match = pattern.search(self.text)
        if match is None:
            raise self.error(f"no {what} in the output")
        return match


def decimal(text: str) -> float | None:
    """``text`` as a number if it is a plain decimal (not ``nan``, ``inf`` or ``1e3``)."""
    return float(text) if _NUMBER_RE.fullmatch(text.strip()) else None
