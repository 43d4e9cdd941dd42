"""Host tuning on a stand-in host root: applied, verified, rolled back to exactly what was
there, after a crash too; the boot-time half turned into fixes."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from kvmlab.cli.main import main
from kvmlab.net import tune
from kvmlab.net.tune import (
    State,
    TuningError,
    apply,
    boot_findings,
    cpu_partitioning,
    rollback,
    verify,
)

FILES = {
    "sys/devices/system/cpu/online": "0-3",
    "proc/sys/kernel/nmi_watchdog": "1",
    "proc/sys/kernel/numa_balancing": "1",
    "proc/sys/vm/stat_interval": "1",
    "sys/kernel/mm/transparent_hugepage/enabled": "always [madvise] never",
    "sys/kernel/mm/ksm/run": "1",
    "sys/devices/virtual/workqueue/cpumask": "f",
    "proc/irq/default_smp_affinity": "f",
    "proc/irq/24/smp_affinity_list": "0-3",
    "proc/irq/31/smp_affinity_list": "2",
}


@pytest.fixture
def host(tmp_path: Path) -> Path:
    root = tmp_path / "host"
    for rel, text in FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text + "\n")
    return root


def test_apply_verify_rollback_restores_every_value_exactly(host: Path, tmp_path: Path) -> None:
    state = State(tmp_path / "state.json")
    settings = cpu_partitioning([2, 3], host)
    done = apply(settings, state, root=host)
    assert not done.failed
    assert (host / "proc/irq/31/smp_affinity_list").read_text().strip() == "0-1"
    assert (host / "sys/devices/virtual/workqueue/cpumask").read_text().strip() == "3"
    saved = json.loads(state.path.read_text())
    assert {c["name"]: c["original"] for c in saved["changes"]}["THP"] == "madvise"
    assert not verify(settings, host).failed
    restored = rollback(state, host)
    assert not restored.failed and not state.path.exists()
    for rel, text in FILES.items():
        now = (host / rel).read_text().strip()
        if "[" in text:  # sysfs shows the choice in brackets; what is written is the word
            text = text.split("[")[1].split("]")[0]
        assert now == text, rel


def test_what_is_right_already_is_not_touched_or_saved(host: Path, tmp_path: Path) -> None:
    (host / "proc/sys/kernel/nmi_watchdog").write_text("0\n")
    state = State(tmp_path / "state.json")
    apply(cpu_partitioning([3], host), state, root=host)
    names = [c["name"] for c in json.loads(state.path.read_text())["changes"]]
    assert "nmi_watchdog" not in names and "IRQ 24 affinity" in names


def test_a_setting_that_cannot_be_written_is_reported_and_not_saved(
    host: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:  # fmt: skip
    real = Path.write_text

    def write_text(self: Path, data: str, *args: object, **kw: object) -> int:
        if self.name == "run" and "ksm" in str(self):  # a knob the kernel refuses (EIO)
            raise OSError(5, "Input/output error")
        return real(self, data, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(Path, "write_text", write_text)
    state = State(tmp_path / "state.json")
    out = apply(cpu_partitioning([3], host), state, root=host)
    assert out.failed == [("KSM", "Input/output error")]
    saved = [c["name"] for c in json.loads(state.path.read_text())["changes"]]
    assert "KSM" not in saved and "THP" in saved  # the others were applied and saved
    monkeypatch.undo()
    rollback(state, host)
    assert (host / "sys/kernel/mm/ksm/run").read_text().strip() == "1"


def test_applying_twice_is_refused(host: Path, tmp_path: Path) -> None:
    state = State(tmp_path / "state.json")
    apply(cpu_partitioning([3], host), state, root=host)
    with pytest.raises(TuningError, match="applied already"):
        apply(cpu_partitioning([3], host), state, root=host)


def test_isolating_every_cpu_is_refused(host: Path) -> None:
    with pytest.raises(TuningError, match="no CPU of its own"):
        cpu_partitioning([0, 1, 2, 3], host)


def test_the_next_kvmlab_rolls_back_tuning_whose_run_died(
    host: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    state = State(tmp_path / "state.json")
    monkeypatch.setenv("KVMLAB_TUNING_STATE", str(state.path))
    monkeypatch.setattr(tune, "HOST_ROOT", host)
    apply(cpu_partitioning([2, 3], host), state, owner=(2**22, 1), root=host)  # above pid_max: gone
    monkeypatch.setattr(sys, "argv", ["kvmlab", "results", "ls"])
    monkeypatch.setenv("KVMLAB_RESULTS", str(tmp_path / "r.sqlite"))
    with pytest.raises(SystemExit):
        main()
    assert "rolled back the tuning of a kvmlab run that died" in capsys.readouterr().err
    assert not state.path.exists()
    assert (host / "proc/sys/kernel/nmi_watchdog").read_text().strip() == "1"


def test_boot_time_settings_become_exact_fixes() -> None:
    missing = boot_findings([2, 3], "quiet isolcpus=managed_irq,2-3 nohz_full=2 rcu_nocbs=2-3")
    whats = [m for m, _ in missing]
    assert any(w.startswith("nohz_full=2 does not cover CPUs 2-3") for w in whats)
    assert not any(w.startswith(("isolcpus", "rcu_nocbs")) for w in whats)
    assert any("1G huge pages" in w for w in whats)
    assert "add nohz_full=2-3 to GRUB_CMDLINE_LINUX" in dict(missing)[whats[0]]
