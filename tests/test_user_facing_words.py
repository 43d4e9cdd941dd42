"""What users read names kvmlab's source documents in words, never by the numbers they had
inside the project ("seed 001"): users never saw those documents. And every shipped lab is
named after its file, so ``kvmlab up NAME`` and ``kvmlab down NAME`` agree."""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import ROOT

PACKAGE = ROOT / "src" / "kvmlab"
SHIPPED_LABS = sorted((PACKAGE / "labs").glob("*.toml"))
SUFFIXES = {".py", ".toml", ".sh", ".c"}
# The history of measurements may quote how a figure was first recorded.
NOT_USER_FACING = {ROOT / "docs" / "measurements.md"}
# "seed 001", "Seed 003's", "seed001", "seed_004", and "seeds 000 and 003".
INTERNAL_NUMBER = re.compile(r"seeds?[ _-]?\d{3}|seeds 0", re.IGNORECASE)


def user_facing_files() -> Iterator[Path]:
    """The package's sources, data and lab files (``labs/`` is the package's lab directory
    under another name, read here too should it ever be a directory of its own) and the
    documentation."""
    for top in (PACKAGE, ROOT / "labs"):
        for path in sorted(top.rglob("*")):
            if path.suffix in SUFFIXES and path.is_file() and "__pycache__" not in path.parts:
                yield path
    for path in sorted((ROOT / "docs").rglob("*")):
        if path.is_file() and path not in NOT_USER_FACING:
            yield path


def test_the_scan_sees_the_package_labs_and_docs() -> None:
    seen = set(user_facing_files())
    assert PACKAGE / "exits" / "rules.toml" in seen
    assert PACKAGE / "labs" / "nested.toml" in seen
    assert ROOT / "docs" / "lab-reference.md" in seen
    assert not any(p.suffix == ".pyc" for p in seen)


def test_no_internal_source_document_numbers() -> None:
    found = []
    for path in user_facing_files():
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if match := INTERNAL_NUMBER.search(line):
                shown = path.relative_to(ROOT)
                found.append(f"{shown}:{number}: {match.group(0)!r} in {line.strip()[:100]}")
    assert not found, (
        "name the write-up in words (e.g. 'the idle-guest exit-storm write-up', 'the HPET "
        "fix'), not by its internal number:\n" + "\n".join(found)
    )


@pytest.mark.parametrize("text", ["seed 001", "Seed 003's", "seed001", "seeds 000 and 003"])
def test_the_pattern_catches_internal_numbers(text: str) -> None:
    assert INTERNAL_NUMBER.search(text)


@pytest.mark.parametrize("text", ["a NoCloud seed (user, ssh keys)", "RDSEED", "--seed 7"])
def test_the_pattern_leaves_other_seeds_alone(text: str) -> None:
    assert not INTERNAL_NUMBER.search(text)


def test_labs_are_shipped() -> None:
    assert len(SHIPPED_LABS) >= 10, SHIPPED_LABS


@pytest.mark.parametrize("lab_file", SHIPPED_LABS, ids=[p.stem for p in SHIPPED_LABS])
def test_a_shipped_lab_is_named_after_its_file(lab_file: Path) -> None:
    name = tomllib.loads(lab_file.read_text()).get("name")
    assert name == lab_file.stem, (
        f"{lab_file.name}: name = {name!r}; a shipped lab's name is its file's stem "
        f"(rename the file or set name = {lab_file.stem!r})"
    )
