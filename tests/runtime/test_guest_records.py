"""A guest's record (``guest.json``) is read like any input, field by field: a value of
the wrong type or range makes that guest ``unreadable`` (named, with why) and never a
traceback, and the other guests are listed as they are."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from kvmlab.cli.main import main
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
