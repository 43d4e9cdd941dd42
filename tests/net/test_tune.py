"""Host tuning on a stand-in host root: applied, verified, rolled back to exactly what was
there, after a crash too; the boot-time half turned into fixes."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

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


def refusing(monkeypatch: pytest.MonkeyPatch, part: str) -> None:
    """Writes to paths containing ``part`` fail with EIO, as the kernel refuses them."""
    real = Path.write_text

    def write_text(self: Path, data: str, *args: Any, **kw: Any) -> int:
        if part in str(self):
            raise OSError(5, "Input/output error")
        return real(self, data, *args, **kw)

    monkeypatch.setattr(Path, "write_text", write_text)


def test_a_setting_that_cannot_be_written_fails_and_nothing_stays_changed(
    host: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    refusing(monkeypatch, "ksm/run")
    state = State(tmp_path / "state.json")
    out = apply(cpu_partitioning([3], host), state, root=host)
    monkeypatch.undo()
    assert out.failed == [("KSM", "Input/output error")] and out.undone
    assert not state.path.exists()
    for rel, text in FILES.items():  # every value this apply wrote was written back
        now = (host / rel).read_text().strip()
        assert now == (text.split("[")[1].split("]")[0] if "[" in text else text), rel


def managed_irq(host: Path, irq: str, lands: str, read_only: bool = True) -> None:
    """IRQ ``irq`` as the kernel shows one it manages: a handler's directory, where its
    interrupts land, and (kernels since 4.x) a read-only affinity file."""
    (host / f"proc/irq/{irq}/virtio1-req.0").mkdir()
    (host / f"proc/irq/{irq}/effective_affinity_list").write_text(lands + "\n")
    if read_only:
        (host / f"proc/irq/{irq}/smp_affinity_list").chmod(0o444)


def test_an_irq_the_kernel_will_not_move_off_an_isolated_cpu_fails_the_apply(
    host: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    managed_irq(host, "24", "3")
    state = State(tmp_path / "state.json")
    out = apply(cpu_partitioning([3], host), state, root=host)
    ((name, why),) = out.failed
    assert name == "IRQ 24 affinity" and out.undone and not state.path.exists()
    assert "IRQ 24 (virtio1-req.0) lands on isolated CPU 3" in why
    assert "isolcpus=managed_irq,domain,3" in why
    assert (host / "proc/sys/kernel/nmi_watchdog").read_text().strip() == "1"


def test_an_unmovable_irq_accepted_is_named_and_verify_knows_it(
    host: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    managed_irq(host, "24", "3")
    state = State(tmp_path / "state.json")
    settings = cpu_partitioning([3], host)
    out = apply(settings, state, root=host, accept_unmovable=True)
    assert not out.failed and [n for n, _ in out.unmovable] == ["IRQ 24 affinity"]
    assert "accepted" in out.unmovable[0][1]
    assert not verify(settings, host, accept_unmovable=True).failed
    refused = verify(settings, host)
    assert [n for n, _ in refused.failed] == ["IRQ 24 affinity"]


def test_an_irq_whose_move_is_refused_on_a_host_cpu_passes_once_apply_found_it(
    host: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    managed_irq(host, "24", "1", read_only=False)  # an older kernel: the write fails
    refusing(monkeypatch, "irq/24/smp_affinity_list")
    state = State(tmp_path / "state.json")
    settings = cpu_partitioning([3], host)
    out = apply(settings, state, root=host)
    monkeypatch.undo()
    assert not out.failed and "lands on 1, a host CPU" in out.unmovable[0][1]
    saved = state.read()
    assert saved is not None
    assert not verify(settings, host, saved.unmovable).failed
    unknown = verify(settings, host)  # no record: it may run on CPU 3
    assert unknown.failed == [
        (
            "IRQ 24 affinity",
            "IRQ 24 (virtio1-req.0) may run on CPUs 0-3 (wanted 0-2); its interrupts land on 1 now",
        )
    ]
    rollback(state, host)
    assert not state.path.exists()


def test_an_irq_moved_back_by_someone_else_fails_verify(host: Path, tmp_path: Path) -> None:
    state = State(tmp_path / "state.json")
    settings = cpu_partitioning([3], host)
    apply(settings, state, root=host)
    (host / "proc/irq/31/smp_affinity_list").write_text("3\n")  # irqbalance, or a user
    failed = verify(settings, host).failed
    assert [n for n, _ in failed] == ["IRQ 31 affinity"] and "may run on CPUs 3" in failed[0][1]


def test_applying_twice_is_refused(host: Path, tmp_path: Path) -> None:
    state = State(tmp_path / "state.json")
    apply(cpu_partitioning([3], host), state, root=host)
    with pytest.raises(TuningError, match="applied already"):
        apply(cpu_partitioning([3], host), state, root=host)


def test_isolating_every_cpu_is_refused(host: Path) -> None:
    with pytest.raises(TuningError, match="no CPU of its own"):
        cpu_partitioning([0, 1, 2, 3], host)


def test_the_next_kvmlab_rolls_back_tuning_whose_run_died(
    host: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
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


def test_an_irq_gone_while_judged_lands_nowhere(host: Path) -> None:
    managed_irq(host, "24", "3")
    (host / "proc/irq/24/effective_affinity_list").unlink()
    (host / "proc/irq/24/smp_affinity_list").chmod(0o644)
    (host / "proc/irq/24/smp_affinity_list").unlink()
    assert tune._lands_on(host, 24) == ()
