"""``kvmlab doctor --root DIR`` never hangs on a file nor reads one without end.

A FIFO at DIR/proc/cpuinfo hung the doctor (only a signal ended it); a symlink to
/dev/zero there was read until memory ran out. Every file the doctor reads goes through
:func:`kvmlab.host.probe.read_bounded`: only a regular file is opened (/proc and /sys
pseudo-files are regular files of size 0), without blocking, and at most
:data:`kvmlab.host.probe.MAX_READ` bytes; a FIFO, device, socket or larger file is
"unreadable" with the reason, and the check reading it says so."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kvmlab.host.doctor import run_checks
from kvmlab.host.findings import Status
from kvmlab.host.probe import MAX_READ, HostProbe, Unreadable, read_bounded

from .trees import PVM, by_id

KVMLAB = str(Path(sys.executable).with_name("kvmlab"))
CPUINFO = "/proc/cpuinfo"


def replace_with(tree: Path, rel: str, kind: str) -> Path:
    """Put ``kind`` where tree's ``rel`` was: a FIFO, a link to /dev/zero, a big file."""
    path = tree / rel
    path.unlink(missing_ok=True)
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "zero":
        path.symlink_to("/dev/zero")
    elif kind == "big":
        with path.open("wb") as f:
            f.truncate(MAX_READ + 1)  # sparse: reads as zeros, past the bound
    else:
        raise AssertionError(kind)
    return path


@pytest.fixture
def pvm(tree_copy: Callable[[Path], Path]) -> Path:
    return tree_copy(PVM)


WHY = {
    "fifo": "a FIFO, not a regular file",
    "zero": "a character device, not a regular file",
    "big": f"larger than {MAX_READ >> 20} MiB",
}


@pytest.mark.parametrize("kind", sorted(WHY))
def test_a_cpuinfo_that_is_no_file_is_unreadable_with_the_reason(kind: str, pvm: Path) -> None:
    replace_with(pvm, "proc/cpuinfo", kind)
    found = by_id(run_checks(pvm))
    for check in ("cpu.vendor", "cpu.virt"):
        f = found[check]
        assert f.status is Status.WARN
        assert f.summary == f"{CPUINFO} is unreadable ({WHY[kind]})"
        assert (CPUINFO, f"unreadable: {WHY[kind]}") in [(e.source, e.value) for e in f.evidence]


def test_the_real_cli_does_not_hang_on_a_fifo_nor_read_dev_zero(pvm: Path, tmp_path: Path) -> None:
    """A FIFO and /dev/zero in place of a host file, through the real CLI: one line of JSON
    each, promptly, and the memory the run may take is capped so an unbounded read fails
    the test."""
    replace_with(pvm, "proc/cpuinfo", "fifo")
    zero_tree = tmp_path / "zero"
    subprocess.run(["cp", "-a", str(PVM), str(zero_tree)], check=True)
    replace_with(zero_tree, "proc/cpuinfo", "zero")
    env = {**os.environ, "KVMLAB_TUNING_STATE": str(tmp_path / "t.json")}
    doctor = ["doctor", "-o", "json", "--root"]
    for tree, why in ((pvm, WHY["fifo"]), (zero_tree, WHY["zero"])):
        proc = subprocess.run(
            ["/bin/sh", "-c", 'ulimit -v 1500000; exec "$0" "$@"', KVMLAB, *doctor, str(tree)],
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
            env=env,
        )
        assert proc.returncode in (0, 1), proc.stderr
        assert proc.stderr == ""
        found = {f["id"]: f for f in json.loads(proc.stdout)["findings"]}
        assert found["cpu.vendor"]["summary"] == f"{CPUINFO} is unreadable ({why})"


def test_a_module_parameter_that_is_a_fifo_is_named_in_its_check(
    tree_copy: Callable[[Path], Path],
) -> None:
    from .trees import INTEL

    tree = tree_copy(INTEL)
    replace_with(tree, "sys/module/kvm_intel/parameters/nested", "fifo")
    f = by_id(run_checks(tree))["kvm.nested"]
    assert f.status in (Status.WARN, Status.FAIL)
    path = "/sys/module/kvm_intel/parameters/nested"
    assert (path, f"unreadable: {WHY['fifo']}") in [(e.source, e.value) for e in f.evidence]
    assert f"{path} is unreadable ({WHY['fifo']})" in f.summary


def test_a_recorded_command_output_that_is_a_fifo_is_an_unreadable_record(pvm: Path) -> None:
    record = next((pvm / ".commands").glob("*.txt"))
    replace_with(pvm, str(record.relative_to(pvm)), "fifo")
    probe = HostProbe(pvm)
    argv = tuple(record.stem.split("_"))
    result = probe.run(argv)
    assert result.returncode is None
    assert result.output == f"unreadable record .commands/{record.name}: {WHY['fifo']}"


def test_the_recorded_kvm_answer_that_is_a_device_is_an_unreadable_record(pvm: Path) -> None:
    replace_with(pvm, ".ioctl/KVM_GET_API_VERSION.txt", "zero")
    access = HostProbe(pvm).kvm_access()
    assert not access.usable
    assert access.error == f"unreadable record .ioctl/KVM_GET_API_VERSION.txt: {WHY['zero']}"


@pytest.fixture
def unix_socket(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "sock"
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(path))
        yield path


def test_read_bounded_refuses_what_is_not_a_regular_file(tmp_path: Path, unix_socket: Path) -> None:
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "zero").symlink_to("/dev/zero")
    (tmp_path / "dir").mkdir()
    cases = {
        tmp_path / "fifo": "a FIFO, not a regular file",
        tmp_path / "zero": "a character device, not a regular file",
        tmp_path / "dir": "a directory, not a regular file",
        unix_socket: "a socket, not a regular file",
    }
    for path, why in cases.items():
        with pytest.raises(Unreadable) as caught:
            read_bounded(path)
        assert caught.value.why == why


def test_read_bounded_reads_up_to_its_bound_and_no_further(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"x" * 10)
    assert read_bounded(path, limit=10) == "x" * 10
    with pytest.raises(Unreadable, match="larger than"):
        read_bounded(path, limit=9)
    with pytest.raises(FileNotFoundError):
        read_bounded(tmp_path / "missing")
    with pytest.raises(FileNotFoundError):  # a file where a directory should be
        read_bounded(path / "below")


def test_proc_pseudo_files_report_size_0_and_are_read_whole() -> None:
    assert Path("/proc/self/status").stat().st_size == 0
    text = read_bounded(Path("/proc/self/status"))
    assert text.startswith("Name:") and "Pid:" in text


def test_a_missing_file_is_missing_not_unreadable(pvm: Path) -> None:
    (pvm / "proc/cpuinfo").unlink()
    probe = HostProbe(pvm)
    assert probe.read(CPUINFO) is None and probe.unreadable(CPUINFO) is None
    assert probe.cannot_read(CPUINFO) == f"{CPUINFO} is missing"
