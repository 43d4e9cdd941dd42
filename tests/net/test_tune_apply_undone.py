"""A tune apply that does not finish leaves nothing changed, or says what it could not put
back: cut short by Ctrl-C or SIGTERM, everything it changed is written back; a write-back
that fails is named with the state file that keeps it, never "nothing changed"; a rollback
with only unmovable IRQs on record says there was nothing to roll back. Run on a
stand-in host root, never this host's."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from kvmlab.net import tune
from kvmlab.net.tune import State, apply, cpu_partitioning
from tests.net.test_tune import FILES, host, managed_irq

__all__ = ["host"]  # the stand-in host root fixture


def untouched(root: Path) -> None:
    for rel, text in FILES.items():
        now = (root / rel).read_text().strip()
        assert now == (text.split("[")[1].split("]")[0] if "[" in text else text), rel


def test_an_apply_interrupted_part_way_writes_back_what_it_changed(
    host: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = Path.write_text

    def write_text(self: Path, data: str, *args: Any, **kw: Any) -> int:
        if "irq/31" in str(self):  # Ctrl-C (or SIGTERM, the CLI's KeyboardInterrupt) here
            raise KeyboardInterrupt
        return real(self, data, *args, **kw)

    monkeypatch.setattr(Path, "write_text", write_text)
    state = State(tmp_path / "state.json")
    with pytest.raises(KeyboardInterrupt):
        apply(cpu_partitioning([3], host), state, root=host)
    monkeypatch.undo()
    assert not state.path.exists()
    untouched(host)


def test_an_apply_whose_write_back_fails_does_not_say_nothing_changed(
    host: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    managed_irq(host, "24", "3")  # fails the apply: everything goes back, but ...
    real = tune._write_back

    def write_back(path: Path, value: str) -> None:
        if path.name == "stat_interval":  # ... this one cannot
            raise OSError(1, "Operation not permitted")
        real(path, value)

    monkeypatch.setattr(tune, "_write_back", write_back)
    state = State(tmp_path / "state.json")
    out = apply(cpu_partitioning([3], host), state, root=host)
    assert not out.undone and state.path.exists()
    assert [d[0] for d in out.done] == ["vmstat interval"]
    assert (
        "vmstat interval",
        "could not be written back (Operation not permitted); "
        f"{state.path} keeps it for 'kvmlab tune rollback'",
    ) in out.failed


def test_a_rollback_of_unmovable_irqs_only_says_so(tmp_path: Path) -> None:
    from tests.conftest import cli

    private = tmp_path / "state"
    private.mkdir(mode=0o700)
    state = private / "st.json"
    state.write_text(
        '{"owner": null, "root": "/", "changes": [], '
        '"unmovable": ["proc/irq/9999999/smp_affinity_list"]}'
    )
    state.chmod(0o600)
    env = {**os.environ, "KVMLAB_TUNING_STATE": str(state)}
    back = cli(env, "tune", "rollback")
    assert (
        back.returncode == 0 and "nothing to roll back: the tuning changed no value" in back.stdout
    )
    assert not state.exists()
