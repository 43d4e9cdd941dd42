"""A lab's switch record (``LAB/.switch/switch.json``) is read like any input: a process
on it is signalled only while it is still the switch's (its start time, and a command line
naming the switch's directory), and a record that is not kvmlab's is acted on not at all.
The victims are programs this test starts; no switch runs."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kvmlab.fabric import switch
from kvmlab.proc.processes import start_time


@pytest.fixture
def victim() -> Iterator[tuple[int, int]]:
    """A program named like testpmd, started here: (pid, start time)."""
    proc = subprocess.Popen(
        ["bash", "-c", 'exec -a "dpdk-testpmd" sleep 300'], start_new_session=True
    )
    for _ in range(100):
        if Path(f"/proc/{proc.pid}/cmdline").read_bytes().startswith(b"dpdk-testpmd"):
            break
        time.sleep(0.05)
    started = start_time(proc.pid)
    assert started is not None
    yield proc.pid, started
    proc.send_signal(signal.SIGKILL)
    proc.wait()


@pytest.fixture
def switch_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    from kvmlab.proc.confined import create_owned

    monkeypatch.setenv("KVMLAB_RUN_DIR", str(tmp_path / "run"))
    lab = create_owned(tmp_path / "run" / "lab", "lab lab")
    return create_owned(lab / ".switch", "switch")


def record(root: Path, **fields: object) -> None:
    base: dict[str, object] = {
        "kind": "testpmd",
        "ports": ["kvmlab-gen", "kvmlab-sink"],
        "processes": [],
        "hugepages": None,
        "netns": None,
        "main_core": 0,
        "cores": [1],
    }
    (root / switch.RECORD).write_text(json.dumps({**base, **fields}))


def test_a_process_with_the_recorded_start_time_but_not_the_switch_s_is_left(
    switch_dir: Path, victim: tuple[int, int]
) -> None:
    pid, started = victim
    record(switch_dir, processes=[["switch", pid, started]])
    assert switch.recorded_alive(switch_dir) is None
    assert switch.stop_recorded(switch_dir) is False
    assert Path(f"/proc/{pid}").exists() and not switch_dir.exists()


@pytest.mark.parametrize(
    "processes",
    [
        [["switch", "VICTIM", None]],  # no start time: no proof
        [["switch", "VICTIM", "x"]],
        [["rm -rf /", "VICTIM", 1]],  # no program of a switch
        [["switch", True, 1]],
        "VICTIM",
    ],
)
def test_a_record_that_is_not_kvmlab_s_signals_nothing(
    processes: object, switch_dir: Path, victim: tuple[int, int]
) -> None:
    pid, _ = victim
    text = json.dumps(processes).replace('"VICTIM"', str(pid))
    record(switch_dir)
    raw = json.loads((switch_dir / switch.RECORD).read_text())
    raw["processes"] = json.loads(text)
    (switch_dir / switch.RECORD).write_text(json.dumps(raw))
    assert switch.read_record(switch_dir) is None
    assert switch.stop_recorded(switch_dir) is False
    assert Path(f"/proc/{pid}").exists()


@pytest.mark.parametrize(
    "hugepages",
    [[5, 3], [0, 1 << 30], [-1, 2], ["0", 2], [0, 2, 3], "no processes"],
)
def test_a_huge_page_count_out_of_range_is_not_kvmlab_s(
    hugepages: object, switch_dir: Path
) -> None:
    """A record's huge pages are given back only from a record kvmlab could have written
    (fewer before than after, by at most 2^20 pages)."""
    if hugepages == "no processes":  # a switch kvmlab records only once it has a process
        record(switch_dir, hugepages=[0, 8], processes=[])
    else:
        record(switch_dir, hugepages=hugepages, processes=[["switch", 1, 1]])
    assert switch.read_record(switch_dir) is None


def test_a_fifo_as_the_record_does_not_hang(switch_dir: Path) -> None:
    import os

    os.mkfifo(switch_dir / switch.RECORD)
    assert switch.read_record(switch_dir) is None
