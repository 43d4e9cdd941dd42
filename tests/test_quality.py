"""The linters are part of the tests: ruff (lint and format) on the tree, mypy --strict on
the package, the benchmarks (scripts the README names, which nothing else imports) and the
tests."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT

BIN = Path(sys.executable).parent


def test_ruff_clean() -> None:
    proc = subprocess.run(
        [str(BIN / "ruff"), "check", "--output-format", "concise", "src", "tests", "benchmarks"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_ruff_format_clean() -> None:
    """One formatter decides layout (``ruff format``); a diff shows meaning, not spacing."""
    proc = subprocess.run(
        [str(BIN / "ruff"), "format", "--check", "src", "tests", "benchmarks"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_mypy_strict_clean() -> None:
    """Bare ``mypy``: the files pyproject names, the package, the benchmarks and the tests."""
    proc = subprocess.run(
        [str(BIN / "mypy")], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    summary = re.search(r"in (\d+) source files", proc.stdout)
    assert summary is not None, proc.stdout
    checked = int(summary.group(1))
    expected = [
        *(ROOT / "src").rglob("*.py"),
        *(ROOT / "benchmarks").glob("*.py"),
        *(ROOT / "tests").rglob("*.py"),
    ]
    assert checked == len(expected), "mypy checks the package, the benchmarks and the tests"


def test_no_hand_packed_lines() -> None:
    """Layout is the formatter's: no ``fmt: skip``/``fmt: off`` protecting hand-packed code."""
    marker = re.compile(r"#\s*fmt:\s*(skip|off)\b")
    found = [
        f"{path.relative_to(ROOT)}:{number}"
        for top in ("src", "tests", "benchmarks")
        for path in sorted((ROOT / top).rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if marker.search(line) and path != Path(__file__)
    ]
    assert not found, f"{len(found)} formatter escapes: {found[:10]}"
