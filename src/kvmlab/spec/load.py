"""Reading lab files: TOML in, a validated :class:`Lab` or one line per problem out."""

from __future__ import annotations

import hashlib
import os
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
from kvmlab.paths import shipped_lab_data
from kvmlab.spec.files import host_file_problems
from kvmlab.spec.lab import Lab, deep_merge
from kvmlab.spec.messages import explain
from kvmlab.spec.messages import format_loc as format_loc  # exits.fixes names keys with it
from kvmlab.spec.rules import check_lab
from kvmlab.spec.toml_errors import toml_problem
from kvmlab.spec.units import number_text

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
        """The folder relative paths in the lab are resolved against: the lab file's own,
        or for a lab shipped with kvmlab, its directory in kvmlab's data directory (its
        scratch disks are never written into the installed package)."""
        return shipped_lab_data(self.path) or self.path.parent


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
    loaded = LoadedLab(lab=lab, path=path.absolute(), digest=hashlib.sha256(data).hexdigest())
    problems = _file_problems(loaded, str(path))
    if problems:
        raise SpecError(problems)
    return loaded


def _file_problems(loaded: LoadedLab, shown: str) -> list[Problem]:
    """Host files of the lab and its variants that exist and are not what they name
    (:mod:`kvmlab.spec.files`); a variant's are said when they are not the lab's own."""
    found = host_file_problems(loaded.lab, loaded.directory)
    problems = [Problem(shown, key, message) for key, message in found]
    for name, variant in loaded.variants().items() if loaded.lab.variants else ():
        for key, message in host_file_problems(variant.lab, loaded.directory):
            if (key, message) not in found:
                problems.append(Problem(shown, f"variants.{name}.{key}", message))
    return problems


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
    except (tomllib.TOMLDecodeError, ValueError) as exc:  # ValueError: 4300+ digits
        raise SpecError([toml_problem(shown, text, exc)]) from None
    except RecursionError:  # deeper than Python's stack, so deeper than MAX_DEPTH
        raise SpecError([_too_deep(shown)]) from None
    if _depth(raw) > MAX_DEPTH:
        raise SpecError([_too_deep(shown)])
    if not raw:
        raise SpecError(
            [Problem(shown, "", "the file is empty; a lab needs name and a [guests.NAME] table")]
        )
    return validate_lab(raw, shown)


def validate_lab(raw: dict[str, Any], shown: str) -> Lab:
    """A lab from a parsed lab file (TOML's values: tables, arrays, text, numbers, dates),
    its variants included; a :class:`SpecError` with one line per problem."""
    huge = _beyond_64_bits(raw, shown)
    if huge:
        raise SpecError(huge)
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


INT64 = range(-(1 << 63), 1 << 63)
"""TOML's integers: "If an integer cannot be represented losslessly [in 64 bits], an error
must be thrown" (TOML 1.0), which tomllib does not do; a hexadecimal one of thousands of
digits would otherwise reach the models (and pydantic prints such a number, which Python
refuses past 4300 digits, as an "Exception ignored" traceback)."""


def _beyond_64_bits(raw: dict[str, Any], shown: str) -> list[Problem]:
    """A problem for every integer of the parsed file outside :data:`INT64`, by key."""
    found: list[Problem] = []
    stack: list[tuple[Any, tuple[int | str, ...]]] = [(raw, ())]
    while stack:
        value, loc = stack.pop()
        if isinstance(value, dict):
            stack.extend((v, (*loc, k)) for k, v in reversed(value.items()))
        elif isinstance(value, list):
            stack.extend((v, (*loc, i)) for i, v in reversed(list(enumerate(value))))
        elif type(value) is int and value not in INT64:
            found.append(
                Problem(
                    shown,
                    format_loc(loc),
                    f"{number_text(value)} is beyond TOML's integers (64-bit, at most 19 "
                    "digits): give the value the key takes ('kvmlab check --explain')",
                )
            )
    return found


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


def _pydantic_problem(shown: str, err: ErrorDetails) -> Problem:
    key, message = explain(err, Lab)
    return Problem(shown, key, message)
