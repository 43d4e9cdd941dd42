"""Boot a GuestImage with a plain QEMU argv (temporary, until kvmlab.render builds argv).

Owns every process it starts (QEMU, virtiofsd): shutdown is QMP ``quit`` with a
timeout, then SIGTERM, then SIGKILL, all in ``finally``; :meth:`Guest.leftovers` lists
any process still alive whose command line mentions the guest's private directory.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from qemu.qmp.legacy import QEMUMonitorProtocol

from kvmlab.guest.agent import GuestAgent
from kvmlab.guest.image import GuestImage
from kvmlab.guest.initramfs import parse_markers


@dataclass
class BootTimes:
    """Host seconds since QEMU started at which each console marker appeared, and more."""

    marker_host: dict[str, float] = field(default_factory=dict)
    marker_guest: dict[str, float] = field(default_factory=dict)
    agent_ready: float = 0.0

    def stages(self) -> dict[str, float]:
        """QEMU start -> kernel start -> init start -> agent started -> agent answering."""
        init_host = self.marker_host.get("init start", 0.0)
        init_guest = self.marker_guest.get("init start", 0.0)
        started = self.marker_host.get("agent started", init_host)
        return {
            "firmware+load": init_host - init_guest,
            "kernel": init_guest,
            "init": started - init_host,
            "agent": self.agent_ready - started,
            "total": self.agent_ready,
        }


def qemu_argv(
    image: GuestImage,
    workdir: Path,
    *,
    memory: str = "1G",
    smp: int = 2,
    shared_memory: bool | None = None,
    hostname: str = "kvmlab-test",
) -> list[str]:
    """QEMU argv for ``image`` with serial, QMP and agent sockets in ``workdir``."""
    if shared_memory is None:
        shared_memory = image.needs_shared_memory
    argv = [
        "qemu-system-x86_64",
        "-accel",
        "tcg,thread=multi",
        "-cpu",
        "max",
        "-m",
        memory,
        "-smp",
        str(smp),
        "-nodefaults",
        "-display",
        "none",
        "-no-reboot",
        "-serial",
        f"file:{workdir / 'serial.log'}",
        "-qmp",
        f"unix:{workdir / 'qmp.sock'},server=on,wait=off",
        "-kernel",
        str(image.kernel),
        "-initrd",
        str(image.initrd),
        "-append",
        image.cmdline(hostname=hostname),
        "-device",
        "virtio-serial",
        "-chardev",
        f"socket,path={workdir / 'qga.sock'},server=on,wait=off,id=qga0",
        "-device",
        f"virtserialport,chardev=qga0,name={image.agent_port_name}",
    ]
    if shared_memory:
        argv += [
            "-object",
            f"memory-backend-memfd,id=mem,size={memory},share=on",
            "-machine",
            "memory-backend=mem",
        ]
    if image.share == "9p":
        argv += [
            "-virtfs",
            f"local,path=/,mount_tag={image.share_tag},security_model=passthrough,"
            "readonly=on,multidevs=remap",
        ]
    else:
        argv += [
            "-chardev",
            f"socket,id=vfs,path={workdir / 'virtiofs.sock'}",
            "-device",
            f"vhost-user-fs-pci,chardev=vfs,tag={image.share_tag}",
        ]
    return argv


class Guest:
    """A booted guest: the processes, the agent, the logs."""

    def __init__(self, image: GuestImage, workdir: Path) -> None:
        self.image = image
        self.workdir = workdir
        self.procs: list[subprocess.Popen[bytes]] = []
        self.qemu: subprocess.Popen[bytes] | None = None
        self.agent = GuestAgent(workdir / "qga.sock")
        self.times = BootTimes()

    @property
    def serial_log(self) -> str:
        path = self.workdir / "serial.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def start(self, argv: Sequence[str], ready_timeout: float = 90.0) -> None:
        if self.image.virtiofsd is not None:
            self._start_virtiofsd(self.image.virtiofsd)
        t0 = time.monotonic()
        log = (self.workdir / "qemu.log").open("wb")
        self.qemu = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        self.procs.append(self.qemu)
        stop = threading.Event()
        watcher = threading.Thread(target=self._watch_serial, args=(t0, stop), daemon=True)
        watcher.start()
        try:
            self.agent.wait_ready(ready_timeout)
            self.times.agent_ready = time.monotonic() - t0
        finally:
            stop.set()
            watcher.join()
        self.times.marker_guest = parse_markers(self.serial_log)

    def _start_virtiofsd(self, binary: Path) -> None:
        sock = self.workdir / "virtiofs.sock"
        log = (self.workdir / "virtiofsd.log").open("wb")
        argv = [
            str(binary),
            f"--socket-path={sock}",
            "-o",
            "source=/",
            "-o",
            "cache=always",
            "-o",
            "sandbox=chroot",
        ]
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        self.procs.append(proc)
        deadline = time.monotonic() + 10
        while not sock.exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"virtiofsd did not create {sock}; see {log.name}")
            time.sleep(0.01)

    def _watch_serial(self, t0: float, stop: threading.Event) -> None:
        """Note when each marker shows up on the console (10 ms resolution)."""
        while not stop.is_set():
            for event in parse_markers(self.serial_log):
                self.times.marker_host.setdefault(event, time.monotonic() - t0)
            time.sleep(0.01)

    def shutdown(self, timeout: float = 10.0) -> None:
        """QMP quit, then SIGTERM, then SIGKILL; waits for every process."""
        self.agent.close()
        if self.qemu is not None and self.qemu.poll() is None:
            with contextlib.suppress(Exception):
                qmp = QEMUMonitorProtocol(str(self.workdir / "qmp.sock"))
                qmp.connect()
                qmp.cmd("quit")
                qmp.close()
        for proc in reversed(self.procs):
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout)

    def leftovers(self) -> list[int]:
        """Pids of live processes whose command line mentions this guest's directory."""
        mine = str(self.workdir).encode()
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) == os.getpid():
                continue
            with contextlib.suppress(OSError):
                if mine in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
        return found


@contextlib.contextmanager
def booted(image: GuestImage, workdir: Path, **argv_options: Any) -> Iterator[Guest]:
    """Boot ``image`` and yield the Guest once its agent answers; always shut it down."""
    guest = Guest(image, workdir)
    try:
        guest.start(qemu_argv(image, workdir, **argv_options))
        yield guest
    finally:
        guest.shutdown()
