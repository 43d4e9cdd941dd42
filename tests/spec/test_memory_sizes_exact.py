"""Memory sizes are exact and bounded: a size QEMU cannot take whole, one past what a lab
takes, or not a size at all is one line saying what to write; an exact fraction passes.
``check`` runs as a user would; nothing boots."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.spec.labcheck import kvmlab

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
