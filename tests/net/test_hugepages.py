"""Huge pages for a switch, on a stand-in sysfs: reserved only when too few are free, given
back by exactly what was added, with the kernel's refusal turned into the exact fix."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kvmlab.errors import HostError
from kvmlab.fabric.hugepages import Reservation, release, reserve
from kvmlab.spec.units import MIB


class FakePool:
    """nr/free/resv_hugepages; ``limit`` caps what the kernel grants."""

    def __init__(self, root: Path, nr: int, free: int, resv: int = 0, limit: int = 10**6):
        self.root, self.limit = root, limit
        root.mkdir(parents=True, exist_ok=True)
        for name, value in (
            ("nr_hugepages", nr),
            ("free_hugepages", free),
            ("resv_hugepages", resv),
        ):
            (root / name).write_text(f"{value}\n")

    def nr(self) -> int:
        return int((self.root / "nr_hugepages").read_text())


@pytest.fixture(autouse=True)
def run_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KVMLAB_RUN_DIR", str(tmp_path / "run"))


def test_enough_free_pages_are_not_touched(tmp_path: Path) -> None:
    pool = FakePool(tmp_path / "hp", nr=512, free=512)
    res = reserve(512 * MIB, "the switch", pool.root)
    assert not res.changed and pool.nr() == 512
    release(res, pool.root)
    assert pool.nr() == 512


def test_pages_promised_to_others_do_not_count_as_free(tmp_path: Path) -> None:
    pool = FakePool(tmp_path / "hp", nr=256, free=256, resv=200)
    res = reserve(512 * MIB, "the switch", pool.root)  # needs 256, only 56 really free
    assert (res.before, res.after) == (256, 456) and pool.nr() == 456


def test_release_takes_back_only_what_was_added(tmp_path: Path) -> None:
    pool = FakePool(tmp_path / "hp", nr=0, free=0)
    mine = reserve(512 * MIB, "lab a", pool.root)
    assert pool.nr() == 256
    (pool.root / "nr_hugepages").write_text("768\n")  # another lab added 512 meanwhile
    release(mine, pool.root)
    assert pool.nr() == 512  # theirs stay


def test_a_recorded_reservation_is_given_back_only_while_the_pool_still_holds_it(
    tmp_path: Path,
) -> None:
    """A reservation read from another kvmlab's record: a pool made smaller since (the
    admin's 8 pages where the record says 0 -> 8 and now 4) is not kvmlab's to shrink."""
    pool = FakePool(tmp_path / "hp", nr=4, free=4)
    assert not release(Reservation(0, 8), pool.root, guarded=True)
    assert pool.nr() == 4
    (pool.root / "nr_hugepages").write_text("8\n")
    assert release(Reservation(0, 8), pool.root, guarded=True)
    assert pool.nr() == 0


def test_the_kernel_refusing_gives_the_exact_fix_and_changes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pool = FakePool(tmp_path / "hp", nr=10, free=10)
    real = Path.write_text

    def short(self: Path, data: str, *a: Any, **k: Any) -> int:
        if self.name == "nr_hugepages" and int(data) > 100:
            data = "100\n"  # fragmented memory: the kernel grants fewer
        return real(self, data, *a, **k)

    monkeypatch.setattr(Path, "write_text", short)
    with pytest.raises(HostError) as info:
        reserve(1024 * MIB, "the ovs-dpdk switch", pool.root)
    assert "needs 512 free huge pages" in str(info.value)
    assert any("echo 512 >" in f for f in info.value.fix)
    assert pool.nr() == 10


def test_no_huge_page_support_is_a_host_error(tmp_path: Path) -> None:
    with pytest.raises(HostError, match="offers none"):
        reserve(2 * MIB, "the switch", tmp_path / "missing")
    release(Reservation(3, 3), tmp_path / "missing")  # nothing added: nothing to do
