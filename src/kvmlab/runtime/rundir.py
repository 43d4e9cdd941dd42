"""Run directories: private per-lab and per-guest state that outlives one kvmlab command.

Layout under the run root (``kvmlab.paths.run_root()``), every directory 0700::

    LAB/lab.json            which lab file, when it went up
    LAB/.lock               held (flock) while a command changes the lab
    LAB/GUEST/guest.json    pid, argv, accelerator, boot stages of a running guest
    LAB/GUEST/*.sock        QMP, guest agent, console (0600), serial.log, qemu.log
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kvmlab.paths import run_root
from kvmlab.runtime.errors import StateError
from kvmlab.runtime.procs import alive

GUEST_FILE = "guest.json"
LAB_FILE = "lab.json"


def make_private(path: Path) -> Path:
    """Create ``path`` and missing parents as 0700 directories (existing ones are tightened)."""
    missing = [p for p in (path, *path.parents) if not p.exists()]
    for p in reversed(missing):
        p.mkdir(mode=0o700)
    path.chmod(0o700)
    return path


@dataclass
class GuestRecord:
    """What ``kvmlab up`` leaves behind for ``ps``, ``exec``, ``console`` and ``down``."""

    lab: str
    address: list[str]
    pid: int
    argv: list[str]
    accel: str
    accel_reason: str
    vcpus: int
    memory: int
    started: float
    boots_image: bool = True
    children: bool = False
    via: str | None = None
    """For a guest inside a guest hypervisor: that hypervisor's address. Its ``pid`` is the
    hypervisor's QEMU, its agent socket a relay through it; it is stopped from inside."""
    marker: str | None = None
    """What the QEMU process's command line contains (default: this run directory)."""
    boot: dict[str, float] = field(default_factory=dict)

    @property
    def name(self) -> str:
        """``lab/guest`` as users type it."""
        return "/".join([self.lab, *self.address])

    def save(self, run_dir: Path) -> None:
        """Write atomically into the guest's run directory."""
        tmp = run_dir / f".{GUEST_FILE}.tmp"
        tmp.write_text(json.dumps(asdict(self), indent=2))
        tmp.replace(run_dir / GUEST_FILE)

    @classmethod
    def load(cls, run_dir: Path) -> GuestRecord | None:
        """The record in ``run_dir``, or None when there is none or it is unreadable."""
        try:
            data: dict[str, Any] = json.loads((run_dir / GUEST_FILE).read_text())
            return cls(**data)
        except (OSError, ValueError, TypeError):
            return None

    def running(self, run_dir: Path) -> bool:
        """Whether this guest's QEMU still runs (checked against its run directory)."""
        return alive(self.pid, self.marker or str(run_dir))


@dataclass(frozen=True)
class LabDir:
    """The run directory of one lab."""

    lab: str
    root: Path

    @classmethod
    def of(cls, lab: str) -> LabDir:
        """The lab's directory under the run root (not created)."""
        return cls(lab, run_root() / lab)

    def guest_dir(self, address: tuple[str, ...] | list[str]) -> Path:
        """``LAB/GUEST`` (not created)."""
        return self.root.joinpath(*address)

    def records(self) -> Iterator[tuple[Path, GuestRecord]]:
        """Every guest record of the lab, top-level guests first."""
        if not self.root.is_dir():
            return
        for path in sorted(self.root.rglob(GUEST_FILE), key=lambda p: len(p.parts)):
            record = GuestRecord.load(path.parent)
            if record is not None:
                yield path.parent, record

    def write_info(self, lab_file: Path, digest: str) -> None:
        """Remember which lab file is up."""
        info = {"lab": self.lab, "file": str(lab_file), "digest": digest, "up": time.time()}
        (self.root / LAB_FILE).write_text(json.dumps(info, indent=2))

    @contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the lab's lock; another kvmlab changing the same lab is refused, not waited on."""
        make_private(self.root)
        fd = os.open(self.root / ".lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise StateError(
                    f"another kvmlab command is changing lab {self.lab} right now"
                ) from None
            yield
        finally:
            os.close(fd)

    def clear(self) -> None:
        """Delete the lab's state but keep the directory and its lock (while holding it)."""
        for child in self.root.iterdir() if self.root.is_dir() else ():
            if child.name == ".lock":
                continue
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child, ignore_errors=True)
            else:
                child.unlink(missing_ok=True)

    def remove(self) -> None:
        """Delete the lab's run directory."""
        shutil.rmtree(self.root, ignore_errors=True)


def running_labs() -> list[LabDir]:
    """Labs with a run directory under the run root."""
    root = run_root()
    if not root.is_dir():
        return []
    return [LabDir(p.name, p) for p in sorted(root.iterdir()) if p.is_dir()]
