"""Lab files and addresses past kvmlab's depth limits: one line each, with the limit, never
a RecursionError. ``check`` and ``exec`` run as a user would; ``exec`` of an address too
deep is refused before any lab is looked up."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.spec.labcheck import KVMLAB, kvmlab

DEEP = {
    "arrays": "v = " + "[" * 5000 + "]" * 5000,
    "inline-tables": "v = " + "{a = " * 3000 + "1" + "}" * 3000,
    "dotted-keys": "a" + ".a" * 5000 + " = 1",
    "variant": "[guests.vm]\n[variants.v]\nx = " + "{a = " * 40 + "1" + "}" * 40,
}


@pytest.mark.parametrize("case", sorted(DEEP))
def test_toml_nested_deep_is_one_line(case: str, tmp_path: Path) -> None:
    lab = tmp_path / "deep.toml"
    lab.write_text('name = "x"\n' + DEEP[case] + "\n")
    proc = kvmlab("check", str(lab))
    assert proc.returncode == 2
    assert proc.stderr == (
        f"kvmlab: {lab}: tables and arrays nest more than 32 levels deep; a lab nests a few\n"
    )


def guests(depth: int) -> str:
    text = 'name = "deep"\n'
    key = "guests"
    for level in range(1, depth + 1):
        key += f".l{level}" if level == 1 else f".guests.l{level}"
        memory = f"{2 * (depth - level + 1)}G"
        nested = "nested = true\n" if level < depth else ""
        text += f'[{key}]\n{nested}memory = "{memory}"\n'
    return text


def test_guests_nested_past_the_address_limit_are_refused_at_check(tmp_path: Path) -> None:
    lab = tmp_path / "deep.toml"
    lab.write_text(guests(10))
    proc = kvmlab("check", str(lab))
    assert proc.returncode == 2
    (line,) = proc.stderr.splitlines()
    key = ".".join(f"guests.l{n}" for n in range(1, 6))
    assert line == (
        f"kvmlab: {lab}: {key}: guests nest at most 4 levels (L1 to L4); this one would be L5"
    )


def test_four_levels_still_pass(tmp_path: Path) -> None:
    lab = tmp_path / "deep.toml"
    lab.write_text(guests(4))
    proc = kvmlab("check", str(lab))
    assert proc.returncode == 0, proc.stderr


def test_an_address_too_deep_says_so(tmp_path: Path) -> None:
    env_run = {"KVMLAB_RUN_DIR": str(tmp_path / "run")}
    proc = subprocess.run(
        [KVMLAB, "exec", "deep/l1/l2/l3/l4/l5", "--", "true"],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        env={**os.environ, **env_run},
    )
    assert proc.returncode == 2
    assert proc.stderr == (
        "kvmlab: 'deep/l1/l2/l3/l4/l5' is not a guest address: it is 5 "
        "guests deep, and guests nest at most 4 levels (LAB/L1/.../L4)\n"
    )
