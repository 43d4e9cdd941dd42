"""Run directories: private per-lab and per-guest state that outlives one kvmlab command.

Layout under the run root (``kvmlab.paths.run_root()``), every directory 0700 and marked
as kvmlab's (:mod:`kvmlab.proc.confined`), every state file 0600::

    LAB/lab.json            which lab file, when it went up
    LAB/.lock               held (flock) while a command changes the lab
    LAB/GUEST/guest.json    pid and start time, argv, accelerator, state, boot stages
    LAB/GUEST/*.sock        QMP, guest agent, console (0600), serial.log, qemu.log

A guest's record is on disk before its QEMU is spawned (state ``launching``, no pid) and
gets the pid and the process's start time right after; a QEMU whose record never got its
pid is still found by its run directory, which its command line names. So no instant of
``kvmlab up`` leaves a QEMU that ``ps`` and ``down`` cannot see.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from kvmlab.errors import StateError
from kvmlab.paths import run_root
from kvmlab.proc.confined import (
    MARKER,
    checked_run_root,
    create_owned,
    remove_owned,
    write_private,
)
from kvmlab.proc.processes import find_marked
from kvmlab.render.runfiles import (
    AGENT_SOCKET,
    CONSOLE_SOCKET,
    QMP_SOCKET,
    RELAY_SOCKET,
    UNIX_PATH_MAX,
)
from kvmlab.runtime.records import GUEST_FILE as GUEST_FILE
from kvmlab.runtime.records import GuestNic as GuestNic
from kvmlab.runtime.records import GuestRecord as GuestRecord
from kvmlab.spec.names import is_name, lab_name
from kvmlab.spec.values import quoted

LAB_FILE = "lab.json"


@dataclass(frozen=True)
class GuestEntry:
    """A guest's run directory as found on disk: its record, or what is wrong with it."""

    lab: str
    run_dir: Path
    address: tuple[str, ...]
    record: GuestRecord | None
    problem: str | None = None

    @property
    def name(self) -> str:
        """``lab/guest``, from the directory (a record may be unreadable)."""
        return "/".join((self.lab, *self.address))

    def processes(self) -> list[int]:
        """This guest's live QEMU processes on this host (none for a guest inside another).

        The recorded pid when it is still that process, and any QEMU whose command line
        names this run directory (spawned but never recorded, or recorded unreadably).
        """
        from kvmlab.runtime import backends  # only once there is a guest to ask about

        rec = self.record
        if rec is not None and rec.via is not None:
            return []
        found = set(find_marked(f"{self.run_dir}/"))
        if (
            rec is not None
            and rec.pid > 0
            and backends.process_here(rec)
            and backends.running(rec, self.run_dir)
        ):
            found.add(rec.pid)
        return sorted(found)

    def state(self) -> str:
        """``running``, ``launching``, ``orphaned`` (its ``up`` died), ``dead``, ``unreadable``."""
        from kvmlab.runtime import backends

        rec = self.record
        if rec is None:
            return "unreadable"
        if not backends.process_here(rec):
            if backends.running(rec, self.run_dir):
                return "running"
            return "launching" if rec.state == "launching" and rec.owner_alive() else "dead"
        if not self.processes():
            return "dead"
        if rec.state == "launching":
            return "launching" if rec.owner_alive() else "orphaned"
        return "running"


def _read_known(run_dir: Path) -> GuestRecord:
    """The record in ``run_dir``, of a backend kvmlab has (else unreadable, like a record
    that does not parse: its QEMU is still found by its run directory)."""
    from kvmlab.runtime import backends

    record = GuestRecord.read(run_dir)
    backends.kind_of(record, run_dir)
    return record


@dataclass(frozen=True)
class LabDir:
    """The run directory of one lab."""

    lab: str
    root: Path

    @classmethod
    def of(cls, lab: str) -> LabDir:
        """The lab's directory under the run root (not created); ``lab`` is checked first."""
        return cls(lab_name(lab), run_root() / lab)

    def guest_dir(self, address: tuple[str, ...] | list[str]) -> Path:
        """``LAB/GUEST`` (not created); every name is checked first."""
        for name in address:
            lab_name(name, "guest name")
        return self.root.joinpath(*address)

    def create_guest_dir(self, address: tuple[str, ...] | list[str]) -> Path:
        """Create ``LAB/GUEST`` (its parents must exist) as kvmlab's own, 0700."""
        return create_owned(self.guest_dir(address), f"guest {'/'.join(address)}")

    def exists(self) -> bool:
        """Whether the lab has a run directory (in a run root that passes the checks)."""
        checked_run_root(create=False)
        return self.root.is_dir() and not self.root.is_symlink()

    def entries(self) -> Iterator[GuestEntry]:
        """Every guest run directory of the lab, top-level guests first.

        Directories that are not kvmlab's (no marker, no record, a name that is not a
        guest name) are left out; symlinks are never followed.
        """
        if not self.exists():
            return
        found: list[GuestEntry] = []
        for top, dirs, _ in os.walk(self.root, followlinks=False):
            dirs[:] = sorted(d for d in dirs if is_name(d))
            here = Path(top)
            if here == self.root:
                continue
            if not (here / MARKER).is_file() and not (here / GUEST_FILE).exists():
                continue
            address = here.relative_to(self.root).parts
            try:
                found.append(GuestEntry(self.lab, here, address, _read_known(here)))
            except StateError as exc:
                found.append(GuestEntry(self.lab, here, address, None, str(exc)))
        yield from sorted(found, key=lambda e: (len(e.address), e.address))

    def live(self) -> list[GuestEntry]:
        """The lab's guests whose QEMU runs (inside a hypervisor: whose hypervisor runs),
        unreadable ones included when a QEMU names their run directory."""
        return [
            e
            for e in self.entries()
            if e.state() != "dead" and (e.record is not None or e.processes())
        ]

    def write_info(self, lab_file: Path, digest: str) -> None:
        """Remember which lab file is up."""
        info = {"lab": self.lab, "file": str(lab_file), "digest": digest, "up": time.time()}
        write_private(self.root / LAB_FILE, json.dumps(info, indent=2))

    @contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the lab's lock; another kvmlab changing the same lab is refused, not waited on."""
        checked_run_root()
        create_owned(self.root, f"lab {self.lab}")
        try:
            fd = os.open(self.root / ".lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        except OSError as exc:
            raise StateError(
                f"cannot take the lock {self.root / '.lock'}: {exc.strerror} "
                "(kvmlab never follows a symlink there)"
            ) from None
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
        """Delete the guests' state and lab.json, keeping the directory and its lock.

        Only what kvmlab created goes: marked guest directories and its own files.
        """
        if not self.exists():
            return
        for child in self.root.iterdir():
            if child.is_dir() and not child.is_symlink() and (child / MARKER).is_file():
                remove_owned(child)
            elif child.name in (LAB_FILE, f".{LAB_FILE}.tmp"):
                child.unlink(missing_ok=True)

    def remove(self) -> None:
        """Delete the lab's run directory (only if kvmlab created it)."""
        remove_owned(self.root)


def guest_sockets(
    lab_dir: LabDir, address: tuple[str, ...], children: Iterable[str] = ()
) -> list[tuple[str, Path]]:
    """The unix sockets under a top-level guest's run directory, each with what it is:
    QMP, guest agent and console of its QEMU; for a guest hypervisor, a relay per guest
    inside it and that guest's agent socket (a link to the relay, in its own directory)."""
    run_dir, name = lab_dir.guest_dir(address), "/".join((lab_dir.lab, *address))
    own = (("QMP", QMP_SOCKET), ("guest agent", AGENT_SOCKET), ("console", CONSOLE_SOCKET))
    found = [(f"{what} socket of guest {name}", run_dir / sock) for what, sock in own]
    for child in children:
        found += [
            (f"relay socket of guest {name} (to {child})", run_dir / RELAY_SOCKET.format(child)),
            (f"guest agent socket of guest {name}/{child}", run_dir / child / AGENT_SOCKET),
        ]
    return found


def check_socket_paths(
    lab_dir: LabDir,
    guests: Iterable[tuple[tuple[str, ...], Iterable[str]]],
    others: Iterable[tuple[str, Path]] = (),
) -> None:
    """Refuse (:class:`StateError`), before anything starts, a run root so long that a
    guest's QMP, agent or other socket path would pass the unix socket limit
    (:data:`UNIX_PATH_MAX` bytes), where QEMU would fail to bind it. ``guests``: each
    top-level guest's address and the names of the guests inside it; ``others``: more
    sockets under the lab's directory (the switch's ports), each with what it is."""
    found = [
        sock for address, children in guests for sock in guest_sockets(lab_dir, address, children)
    ]
    found += [(f"{what} socket of lab {lab_dir.lab}", path) for what, path in others]
    size, what = max(((len(os.fsencode(p)), what) for what, p in found), default=(0, ""))
    if size <= UNIX_PATH_MAX:
        return
    root = str(run_root())
    fits = len(os.fsencode(root)) - (size - UNIX_PATH_MAX)
    sock = (
        f"the {what} would be {size} bytes long, and a unix socket path takes at most "
        f"{UNIX_PATH_MAX}"
    )
    if fits < 2:  # not even /x would do: the names make the path too long
        raise StateError(
            f"{sock}, whatever the run directory; give the lab or its guests shorter names"
        )
    where = (
        "KVMLAB_RUN_DIR"
        if os.environ.get("KVMLAB_RUN_DIR")
        else "the run directory (KVMLAB_RUN_DIR unset)"
    )
    raise StateError(
        f"{where} {quoted(root)} is too long: {sock}; set KVMLAB_RUN_DIR to a "
        f"directory of at most {fits} bytes"
    )


def running_labs() -> list[LabDir]:
    """Labs with a run directory under the run root (kvmlab's own, with valid names)."""
    root = checked_run_root(create=False)
    if not root.is_dir():
        return []
    return [
        LabDir(p.name, p)
        for p in sorted(root.iterdir())
        if is_name(p.name) and p.is_dir() and not p.is_symlink()
    ]
