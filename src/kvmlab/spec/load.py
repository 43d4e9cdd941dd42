"""Reading lab files: TOML in, a validated :class:`Lab` or one line per problem out."""

from __future__ import annotations

import hashlib
import os
import re
import stat
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from kvmlab.bounded import read_at_most
from kvmlab.errors import Problem, SpecError, UsageError
from kvmlab.spec.lab import Lab, deep_merge
from kvmlab.spec.messages import explain
from kvmlab.spec.messages import format_loc as format_loc  # exits.fixes names keys with it
from kvmlab.spec.rules import check_lab

AS_WRITTEN = "default"
"""The name the lab as written is measured and stored under, beside its variants."""


@dataclass(frozen=True)
class LoadedLab:
    """A validated lab with where it came from."""

    lab: Lab
    path: Path
    digest: str
    """sha256 of the file's bytes: identifies the exact spec a result was measured with."""
    variant: str | None = None
    """The variant this is (None: the lab as written); a kvmlab inside a guest hypervisor
    is told it, since it reads the same file."""

    def variants(self, names: Sequence[str] = ()) -> dict[str, LoadedLab]:
        """The lab as written (:data:`AS_WRITTEN`) and each of its variants as a lab of its
        own, in that order: a variant is compared against the lab, never instead of it.
        With ``names``, just those (a :class:`UsageError` names one the lab lacks)."""
        out = {AS_WRITTEN: self}
        if self.lab.variants:
            base = self.lab.model_dump(exclude={"variants"}, exclude_unset=True, by_alias=True)
            for name, overrides in self.lab.variants.items():
                lab = Lab.model_validate(deep_merge(base, overrides))
                out[name] = LoadedLab(lab=lab, path=self.path, digest=self.digest, variant=name)
        for name in names:
            if name not in out:
                have = ", ".join(out)
                raise UsageError(
                    f"{self.path} has no variant {name!r} (it has: {have}; "
                    f"{AS_WRITTEN} is the lab as written)"
                )
        return {name: out[name] for name in dict.fromkeys(names)} if names else out

    def variant_named(self, name: str) -> LoadedLab:
        """One variant (:data:`AS_WRITTEN`: the lab as written), or a UsageError listing
        those there are."""
        return self.variants([name])[name]

    @property
    def directory(self) -> Path:
        """The folder relative paths in the lab are resolved against."""
        return self.path.parent


MAX_LAB_BYTES = 1 << 20
"""Lab files are regular files of at most 1 MiB (a lab is a few KiB; this stops /dev/zero)."""

_KINDS = (
    (stat.S_ISFIFO, "a named pipe"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def load_lab(path: Path | str) -> LoadedLab:
    """Read and validate a lab file; raise :class:`SpecError` listing every problem."""
    path = Path(path)
    data = read_lab_bytes(path)
    lab = parse_lab(data, str(path))
    return LoadedLab(lab=lab, path=path.absolute(), digest=hashlib.sha256(data).hexdigest())


def read_lab_bytes(path: Path) -> bytes:
    """The bytes of a lab file: a regular file of at most :data:`MAX_LAB_BYTES`.

    It is opened without blocking (a FIFO does not hang) and checked before it is read;
    at most one byte more than the limit is ever read (``/dev/zero`` ends at once).
    """
    shown = str(path)

    def problem(message: str) -> SpecError:
        return SpecError([Problem(shown, "", message)])

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except FileNotFoundError:
        raise problem("no such file") from None
    except OSError as exc:
        raise problem(_kind_of(path) or exc.strerror or str(exc)) from None
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise problem("is a directory, not a lab file")
        if not stat.S_ISREG(st.st_mode):
            raise problem(_not_regular(st.st_mode))
        if st.st_size > MAX_LAB_BYTES:
            raise problem(_too_big(st.st_size))
        data = read_at_most(fd, MAX_LAB_BYTES)
        if data is None:
            raise problem(_too_big(None))
        return data
    except OSError as exc:
        raise problem(exc.strerror or str(exc)) from None
    finally:
        os.close(fd)


def _not_regular(mode: int) -> str:
    kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
    return f"is {kind}, not a lab file; a lab file is a regular TOML file"


def _kind_of(path: Path) -> str | None:
    """Why a path that cannot be opened is not a lab file, when its type says so."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return None
    return None if stat.S_ISREG(mode) or stat.S_ISDIR(mode) else _not_regular(mode)


def _too_big(size: int | None) -> str:
    """``size``: the file's size when known (else it grew while being read)."""
    limit = f"{MAX_LAB_BYTES // 1024 // 1024} MiB"
    known = f" ({size} bytes)" if size is not None else ""
    return f"is larger than {limit}{known}; a lab file is at most {limit}"


def parse_lab(data: bytes, shown: str) -> Lab:
    """Validate the bytes of a lab file; ``shown`` names the file in problems."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SpecError([Problem(shown, "", f"not UTF-8 text (byte {exc.start})")]) from None
    # A UTF-8 byte-order mark (Notepad writes one) says nothing about the content: skipped.
    text = text.removeprefix(BOM)
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SpecError([_toml_problem(shown, exc)]) from None
    except RecursionError:  # deeper than Python's stack, so deeper than MAX_DEPTH
        raise SpecError([_too_deep(shown)]) from None
    if _depth(raw) > MAX_DEPTH:
        raise SpecError([_too_deep(shown)])
    if not raw:
        raise SpecError(
            [Problem(shown, "", "the file is empty; a lab needs name and a [guests.NAME] table")]
        )
    try:
        lab = Lab.model_validate(raw)
    except ValidationError as exc:
        raise SpecError([_pydantic_problem(shown, err) for err in exc.errors()]) from None
    problems = [Problem(shown, key, message) for key, message in check_lab(lab)]
    for name, overrides in lab.variants.items():
        problems.extend(_variant_problems(shown, raw, name, overrides))
    if problems:
        raise SpecError(problems)
    return lab


def _variant_problems(
    shown: str, raw: dict[str, Any], name: str, overrides: dict[str, Any]
) -> list[Problem]:
    """A variant must be a valid lab too; its problems are named under ``variants.NAME``."""
    prefix = f"variants.{name}"
    if "variants" in overrides or "name" in overrides:
        return [Problem(shown, prefix, "a variant cannot change the lab's name or variants")]
    base = {k: v for k, v in raw.items() if k != "variants"}
    try:
        lab = Lab.model_validate(deep_merge(base, overrides))
    except ValidationError as exc:
        found = [_pydantic_problem(shown, err) for err in exc.errors()]
        return [Problem(p.file, f"{prefix}.{p.path}", p.message) for p in found]
    return [Problem(shown, f"{prefix}.{key}", msg) for key, msg in check_lab(lab)]


BOM = "\ufeff"
"""The byte-order mark some editors put at the start of a UTF-8 file."""

MAX_DEPTH = 32
"""Tables and arrays of a lab file nest at most this deep (guests in guests included)."""


def _too_deep(shown: str) -> Problem:
    return Problem(
        shown, "", f"tables and arrays nest more than {MAX_DEPTH} levels deep; a lab nests a few"
    )


def _depth(data: Any) -> int:
    """How deep tables and arrays nest in ``data`` (iteratively: no recursion to exhaust)."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(data, 0)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict | list):
            deepest = max(deepest, depth + 1)
            if deepest > MAX_DEPTH:
                return deepest
            children = value.values() if isinstance(value, dict) else value
            stack.extend((child, depth + 1) for child in children)
    return deepest


_TOML_POS = re.compile(r"^(.*) \(at line (\d+), column (\d+)\)$")


def _toml_problem(shown: str, exc: tomllib.TOMLDecodeError) -> Problem:
    match = _TOML_POS.match(str(exc))
    if match:
        message, line, column = match.groups()
        return Problem(shown, f"line {line}, column {column}", f"TOML syntax: {message}")
    return Problem(shown, "", f"TOML syntax: {exc}")


def _pydantic_problem(shown: str, err: ErrorDetails) -> Problem:
    key, message = explain(err, Lab)
    return Problem(shown, key, message)
