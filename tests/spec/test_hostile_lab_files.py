"""Lab files and addresses past kvmlab's depth limits (issue 28, items 4 and 5): one line
each, with the limit, never a RecursionError. ``check`` and ``exec`` run as a user would;
``exec`` of an address too deep is refused before any lab is looked up."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

KVMLAB = str(Path(sys.executable).with_name("kvmlab"))


def kvmlab(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200"}
    return subprocess.run(
        [KVMLAB, *args],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        env=env,
    )


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


SIZES = {
    '"99999999999999999999999T"': "'99999999999999999999999T' is larger than 1024T, the "
    "largest size a lab takes",
    '"1K"': "'1K' is not a whole number of MiB, which QEMU takes: use '1M'",
    '"1.5M"': "'1.5M' is not a whole number of MiB, which QEMU takes: use '1M' or '2M'",
    '"0.3B"': "'0.3B' is not a positive whole number of bytes",
    '"20T"': "'20T' is more RAM than 16T",
    '"1e3"': "'1e3' is not a size; write it like '2G', '512M' or '1GiB'",
}


@pytest.mark.parametrize("size", sorted(SIZES))
def test_memory_sizes_are_exact_and_bounded(size: str, tmp_path: Path) -> None:
    lab = tmp_path / "lab.toml"
    lab.write_text(f'name = "x"\n[guests.a]\nmemory = {size}\n')
    proc = kvmlab("check", str(lab))
    assert proc.returncode == 2
    assert proc.stderr == f"kvmlab: {lab}: guests.a.memory.size: {SIZES[size]}\n"


def test_exact_fractional_sizes_still_pass(tmp_path: Path) -> None:
    lab = tmp_path / "lab.toml"
    lab.write_text('name = "x"\n[guests.a]\nmemory = "1.5G"\n')
    proc = kvmlab("check", str(lab))
    assert proc.returncode == 0, proc.stderr
    assert "1536M anonymous RAM" in proc.stdout


def test_a_nul_in_append_is_refused_at_check(tmp_path: Path) -> None:
    lab = tmp_path / "lab.toml"
    lab.write_text('name = "x"\n[guests.a]\nappend = "quiet\\u0000init=/bin/sh"\n')
    proc = kvmlab("check", str(lab))
    assert proc.returncode == 2
    assert proc.stderr == (
        f"kvmlab: {lab}: guests.a.append: holds '\\x00' at character 6; "
        "write it as one line of printable text\n"
    )


def test_an_ssh_key_with_a_newline_is_refused_at_check(tmp_path: Path) -> None:
    lab = tmp_path / "lab.toml"
    lab.write_text(
        'name = "x"\n[guests.a]\nboot = "disk"\n[[guests.a.disks]]\n'
        'path = "d.qcow2"\n[guests.a.cloud_init]\n'
        'ssh_keys = ["ssh-ed25519 AAAA me\\nssh-rsa BBBB evil"]\n'
    )
    proc = kvmlab("check", str(lab))
    assert proc.returncode == 2
    assert proc.stderr == (
        f"kvmlab: {lab}: guests.a.cloud_init.ssh_keys[0]: holds '\\n' at "
        "character 20; write it as one line of printable text\n"
    )
