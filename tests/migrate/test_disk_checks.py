"""The guest's side of the disk checks, on canned guest answers: which guest device is
which copied disk, what the guest read, and the verdict on what it reads after."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import pytest

from kvmlab.errors import RuntimeFailure
from kvmlab.migrate import guestside

MIB = 1 << 20


@dataclass
class Result:
    returncode: int
    stdout: bytes
    stderr: bytes = b""


class Guest:
    """Answers each shell script with the next canned output; keeps the scripts."""

    def __init__(self, *answers: str) -> None:
        self.answers = list(answers)
        self.scripts: list[str] = []
        self.config = type("Config", (), {"name": "lab/vm"})()

    def level_factor(self) -> float:
        return 1.0

    def exec(self, argv: list[str], **_: Any) -> Result:
        self.scripts.append(argv[-1])
        return Result(0, self.answers.pop(0).encode())


def test_each_copied_disk_is_found_by_kind_order_and_size() -> None:
    guest = Guest(f"vdb {2 * MIB // 512}\nvda {MIB // 512}\nsda {4 * MIB // 512}\n")
    got = guestside.guest_disks(guest, [("vda", MIB), ("sdb", 4 * MIB), ("vdc", 2 * MIB)])  # type: ignore[arg-type]
    assert got == ["vda", "sda", "vdb"]  # the domain's order; the guest's own names


@pytest.mark.parametrize(
    ("listing", "why"),
    [
        (f"vda {MIB // 512}\n", "shows 1 vd* disk(s), the domain copies 2"),
        (f"vda {MIB // 512}\nvdb {MIB // 512}\n", "cannot tell which device is which"),
    ],
)
def test_a_guest_whose_disks_do_not_match_is_refused(listing: str, why: str) -> None:
    with pytest.raises(RuntimeFailure, match=re.escape(why)):
        guestside.guest_disks(Guest(listing), [("vda", MIB), ("vdb", 2 * MIB)])  # type: ignore[arg-type]


def test_the_read_drops_the_page_cache_and_caps_the_size() -> None:
    big = 3 * guestside.DISK_CHECK_MIB * MIB
    guest = Guest(f"disk vda {MIB} aa -\ndisk vdb {big} bb /data\n")
    got = guestside.read_disks(guest, ["vda", "vdb"])  # type: ignore[arg-type]
    assert got == [
        guestside.DiskDigest("vda", MIB, MIB, "aa"),
        guestside.DiskDigest("vdb", big, guestside.DISK_CHECK_MIB * MIB, "bb", "/data"),
    ]
    script = guest.scripts[0]
    assert script.index("drop_caches") < script.index("sha256sum")


def test_a_changed_disk_fails_and_a_mounted_one_is_said_not_compared() -> None:
    before = [
        guestside.DiskDigest("vda", 16 * MIB, 16 * MIB, "a" * 64),
        guestside.DiskDigest("vdb", 16 * MIB, 16 * MIB, "b" * 64, "/data"),
    ]
    same = Guest(f"disk vda {16 * MIB} {'a' * 64} -\ndisk vdb {16 * MIB} {'c' * 64} /data\n")
    ok = guestside.check_disks(same, before)  # type: ignore[arg-type]
    assert ok.ok and "vda (16 MiB of 16 MiB): sha256 aaaaaaaaaaaaaaaa... as before" in ok.evidence
    assert "vdb not compared: mounted at /data" in ok.evidence
    changed = Guest(f"disk vda {16 * MIB} {'d' * 64} -\ndisk vdb {16 * MIB} {'b' * 64} /data\n")
    bad = guestside.check_disks(changed, before)  # type: ignore[arg-type]
    assert not bad.ok and bad.evidence.startswith("vda (16 MiB of 16 MiB): sha256 dddd")


def test_a_disk_the_guest_cannot_read_is_an_error_not_a_pass() -> None:
    with pytest.raises(RuntimeFailure, match="cannot read the disks vda"):
        guestside.read_disks(Guest("sha256sum: /dev/vda: I/O error\n"), ["vda"])  # type: ignore[arg-type]
