"""A rollback writes a tunable back only while it still holds what kvmlab wrote: a value an
administrator (or another tool) set since is left as it is and named with both values, as
tuned does. Runs against a stand-in host root, through the command every kvmlab
invocation starts with (a dead run's state rolled back first)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from kvmlab.cli.main import main
from kvmlab.net import tune
from kvmlab.net.tune import State, apply, cpu_partitioning, rollback
from tests.net.test_tune import host

__all__ = ["host"]  # the stand-in host root fixture

GONE = 2**22  # no process has this pid (pid_max is at most 2^22)


def test_a_value_changed_since_is_left_and_named(host: Path, tmp_path: Path) -> None:
    state = State(tmp_path / "state.json")
    apply(cpu_partitioning([2, 3], host), state, root=host)
    (host / "proc/sys/vm/stat_interval").write_text("5\n")  # the admin, after kvmlab
    out = rollback(state, host)
    assert (host / "proc/sys/vm/stat_interval").read_text().strip() == "5"
    kept = dict(out.kept)
    assert list(kept) == ["vmstat interval"], kept
    (why,) = kept.values()
    assert "is 5, not the 10 kvmlab wrote" in why and "found 1" in why
    assert (host / "proc/sys/kernel/nmi_watchdog").read_text().strip() == "1"  # others back
    assert not state.path.exists()  # a value changed since is no longer kvmlab's to undo


def test_a_dead_run_s_state_does_not_overwrite_the_admin_s_value(
    host: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The reproduction: a dead run's state (``stat_interval`` 1 -> 10), the admin has set
    5 since; the next kvmlab command leaves 5 and says so."""
    target = host / "proc/sys/vm/stat_interval"
    target.write_text("5\n")
    doc = {
        "owner": [GONE, 1],
        "root": str(host),
        "changes": [
            {"name": "vmstat", "path": "proc/sys/vm/stat_interval", "original": "1", "wanted": "10"}
        ],
    }
    path = tmp_path / "state.json"
    path.write_text(json.dumps(doc))
    path.chmod(0o600)
    monkeypatch.setenv("KVMLAB_TUNING_STATE", str(path))
    monkeypatch.setenv("KVMLAB_RESULTS", str(tmp_path / "r.sqlite"))
    monkeypatch.setattr(tune, "HOST_ROOT", host)
    monkeypatch.setattr(sys, "argv", ["kvmlab", "ps"])
    monkeypatch.setenv("KVMLAB_RUN_DIR", str(tmp_path / "run"))
    with pytest.raises(SystemExit):
        main()
    err = capsys.readouterr().err
    assert target.read_text().strip() == "5"
    assert "0 setting(s) restored, 1 left as changed since" in err
    assert "left vmstat: is 5, not the 10 kvmlab wrote" in err
    assert "10 -> 1" not in err


def test_a_value_still_as_kvmlab_wrote_it_is_restored(host: Path, tmp_path: Path) -> None:
    """The guard does not stop an honest rollback: hex masks written as ``3`` and read
    back zero-padded, and CPU lists, compare by value."""
    state = State(tmp_path / "state.json")
    apply(cpu_partitioning([2, 3], host), state, root=host)
    (host / "sys/devices/virtual/workqueue/cpumask").write_text("00000003\n")
    out = rollback(state, host)
    assert not out.kept and not out.failed
    assert (host / "sys/devices/virtual/workqueue/cpumask").read_text().strip() == "f"
