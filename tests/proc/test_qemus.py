"""Every QEMU on the host, whoever started it: names, accelerators and KVM use read from
``/proc`` (libvirt's command lines as libvirt 9.0 writes them)."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kvmlab.proc.qemus import asked_accel, holds_kvm_vm, name_of, qemu_process, qemu_processes

LIBVIRT = [
    "/usr/bin/qemu-system-x86_64",
    "-name",
    "guest=win10,debug-threads=on",
    "-S",
    "-object",
    '{"qom-type":"secret","id":"masterKey0","format":"raw"}',
    "-machine",
    "pc-q35-7.2,usb=off,vmport=off,dump-guest-core=off,memory-backend=pc.ram",
    "-accel",
    "kvm",
    "-cpu",
    "host,migratable=on",
]


@pytest.mark.parametrize(
    ("argv", "name"),
    [
        (LIBVIRT, "win10"),
        (["qemu-system-x86_64", "-name", "plain"], "plain"),
        (["qemu-system-x86_64", "-name", "a,,b,process=x"], "a,b"),
        (["qemu-system-x86_64", "--name", "dashes"], "dashes"),
        (["qemu-system-x86_64", "-m", "512"], None),
        (["qemu-system-x86_64", "-name"], None),
    ],
)
def test_the_name_is_the_one_qemu_shows(argv: list[str], name: str | None) -> None:
    assert name_of(argv) == name


@pytest.mark.parametrize(
    ("words", "accel"),
    [
        (LIBVIRT[1:], "kvm"),
        (["-enable-kvm"], "kvm"),
        (["-machine", "q35,accel=kvm:tcg"], "kvm"),
        (["-M", "pc,accel=tcg"], "tcg"),
        (["-accel", "tcg,thread=multi"], "tcg"),
        (["-m", "1G"], "tcg"),
    ],
)
def test_the_accelerator_asked_for_first(words: list[str], accel: str) -> None:
    assert asked_accel(["qemu-system-x86_64", *words]) == accel


def test_kvm_use_is_what_the_process_holds(tmp_path: Path) -> None:
    fds = tmp_path / "fd"
    fds.mkdir()
    (fds / "0").symlink_to("/dev/null")
    assert holds_kvm_vm(0, fds) is False
    (fds / "9").symlink_to("anon_inode:kvm-vm")
    assert holds_kvm_vm(0, fds) is True
    assert holds_kvm_vm(0, tmp_path / "gone") is None


@pytest.fixture
def named_like_qemu() -> Iterator[int]:
    """A process that runs as ``qemu-system-x86_64`` (a renamed python) with a -name."""
    proc = subprocess.Popen(
        [
            "bash",
            "-c",
            "exec -a qemu-system-x86_64 /usr/bin/python3 -c 'import time; time.sleep(30)' "
            "-name guest=outsider,debug-threads=on",
        ]
    )
    try:
        deadline = time.monotonic() + 30
        while not Path(f"/proc/{proc.pid}/cmdline").read_bytes().startswith(b"qemu-system"):
            assert time.monotonic() < deadline, "bash never ran exec"
            time.sleep(0.01)
        yield proc.pid
    finally:
        proc.kill()
        proc.wait()


def test_a_qemu_nobody_registered_is_found_with_its_name(named_like_qemu: int) -> None:
    found = qemu_process(named_like_qemu)
    assert found is not None
    assert found.name == "outsider" and found.accel == "tcg" and found.uid == os.getuid()
    assert found.argv[0] == "qemu-system-x86_64"
    assert named_like_qemu in {q.pid for q in qemu_processes()}


def test_a_process_that_only_names_qemu_is_not_one() -> None:
    proc = subprocess.Popen(["sleep", "30", "qemu-system-x86_64"])
    try:
        assert qemu_process(proc.pid) is None
        assert qemu_process(os.getpid()) is None
    finally:
        proc.kill()
        proc.wait()
