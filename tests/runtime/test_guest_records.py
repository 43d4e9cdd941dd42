"""A guest's record (``guest.json``) is read like any input, field by field: a value of
the wrong type or range makes that guest ``unreadable`` (named, with why) and never a
traceback, and the other guests are listed as they are."""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from pathlib import Path

import pytest

from kvmlab.cli.main import main
from kvmlab.render.devices.control import PROBE_PORT
from kvmlab.runtime.records import GuestNic
from kvmlab.runtime.rundir import GuestRecord
from tests.fakeguest import running_guest

TAMPERED = [
    ("started", "x"),
    ("started", 1e308),
    ("memory", "1G"),
    ("boot", [1]),
    ("boot", {"total": "x"}),
    ("pid", True),
    ("vcpus", 0),
    ("accel", "\u001b[31mkvm"),
    ("via", "../../etc"),
    ("state", "exploded"),
]


@pytest.mark.parametrize(("key", "value"), TAMPERED, ids=lambda v: repr(v))
def test_a_tampered_record_is_one_unreadable_row_beside_the_others(
    key: str,
    value: object,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("KVMLAB_RUN_DIR", str(tmp_path / "run"))
    monkeypatch.setenv("KVMLAB_RESULTS", str(tmp_path / "r.sqlite"))
    with running_guest("good"), running_guest("bad") as bad:
        data = json.loads((bad / "guest.json").read_text())
        (bad / "guest.json").write_text(json.dumps({**data, key: value}))
        monkeypatch.setattr(sys, "argv", ["kvmlab", "ps", "-o", "json"])
        with pytest.raises(SystemExit) as done:
            main()
        assert done.value.code in (0, None)
        out = capsys.readouterr()
    rows = {r["address"]: r for r in json.loads(out.out)["guests"]}
    assert rows["good/vm1"]["state"] == "running"
    assert rows["bad/vm1"]["state"] == "unreadable"
    assert f"its {key} is" in rows["bad/vm1"]["problem"]
    assert "Traceback" not in out.err and "\x1b" not in out.out


def test_a_record_as_kvmlab_writes_it_is_read_back(tmp_path: Path) -> None:
    record = GuestRecord("lab", ["vm"], 42, ["qemu-system-x86_64"], "tcg", "why", 2, 1 << 30, 1.0)
    record.boot = {"total": 3.5}
    record.save(tmp_path)
    assert GuestRecord.read(tmp_path) == record


def test_a_nested_guests_record_names_its_hypervisor_by_its_address_in_the_lab(
    tmp_path: Path,
) -> None:
    """``via`` is ``l1`` (the guest hypervisor's path in its lab), as start_children writes
    it: read back, not refused as a malformed address."""
    record = GuestRecord("lab", ["l1", "l2"], 42, ["qemu"], "tcg", "why", 1, 1 << 28, 1.0)
    record.via = "l1"
    record.nics = [GuestNic("tap", "kvt0123", "52:54:00:00:00:01")]
    record.migratable = True
    record.save(tmp_path)
    assert GuestRecord.read(tmp_path) == record


def test_a_record_from_before_migratable_and_nics_reads_them_from_its_command_line(
    tmp_path: Path,
) -> None:
    """A lab an earlier kvmlab brought up: its guests' facts read once from the argv it
    recorded (the probe port, the NICs as it rendered them)."""
    argv = [
        "qemu-system-x86_64",
        "-netdev",
        "tap,id=net0,ifname=kvt0123,script=no,downscript=no",
        "-device",
        "virtio-net-pci,netdev=net0,mac=52:54:00:00:00:01",
        "-device",
        f"virtserialport,bus=vser0.0,chardev=probe,name={PROBE_PORT}",
    ]
    old = asdict(GuestRecord("lab", ["vm"], 42, argv, "tcg", "why", 1, 1 << 28, 1.0))
    del old["migratable"], old["nics"]
    (tmp_path / "guest.json").write_text(json.dumps(old))
    read = GuestRecord.read(tmp_path)
    assert read.migratable
    assert read.nics == [GuestNic("tap", "kvt0123", "52:54:00:00:00:01")]
