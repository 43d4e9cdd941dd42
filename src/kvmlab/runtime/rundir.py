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
import math
import os
import stat
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from kvmlab.errors import StateError, printable
from kvmlab.paths import run_root
from kvmlab.proc.confined import (
    MARKER,
    checked_run_root,
    create_owned,
    remove_owned,
    write_private,
)
from kvmlab.proc.processes import alive, find_marked
from kvmlab.render.runfiles import (
    AGENT_SOCKET,
    CONSOLE_SOCKET,
    QMP_SOCKET,
    RELAY_SOCKET,
    UNIX_PATH_MAX,
)
from kvmlab.spec.names import is_name, lab_name
from kvmlab.spec.units import quoted

GUEST_FILE = "guest.json"
LAB_FILE = "lab.json"
MAX_STATE_BYTES = 1 << 20


@dataclass
class GuestRecord:
    """What ``kvmlab up`` leaves behind for ``ps``, ``exec``, ``console`` and ``down``."""

    lab: str
    address: list[str]
    pid: int
    """QEMU's pid; 0 while it is being spawned."""
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
    state: str = "running"
    """``launching`` from before QEMU is spawned until its agent answers, then ``running``."""
    pid_start: int | None = None
    """QEMU's start time (``/proc/PID/stat``): with the pid, it names the process for good."""
    owner: int | None = None
    """While launching: the pid of the kvmlab command starting it."""
    owner_start: int | None = None
    migrations: int = 0
    """How many live migrations this guest has been through (its QEMU is the last
    destination, whose run files were moved here; its own directory is ``.migration-N``)."""
    backend: str = "qemu"
    """Which backend runs the guest (:mod:`kvmlab.runtime.backends` maps it to its class)."""
    backend_fields: dict[str, Any] = field(default_factory=dict)
    """What that backend needs to find the guest again (libvirt: the daemon's URI, the
    domain's UUID and token, ...), read and written by the backend alone."""
    under_kvm: dict[str, str] = field(default_factory=dict)
    """The KVM the guest runs under, as read back where its QEMU runs (its hypervisor's
    module parameters); empty under TCG or when unknown."""

    @property
    def name(self) -> str:
        """``lab/guest`` as users type it."""
        return "/".join([self.lab, *self.address])

    @property
    def qemu_binary(self) -> str:
        """The QEMU in ``argv``: the first ``qemu-system-*`` word (past the host-view wrapper
        before it), else the first word, as a migration records its source; "" when there is
        no argv on record (a guest another host's daemon runs)."""
        found = (a for a in self.argv if Path(a).name.startswith("qemu-system"))
        return next(found, self.argv[0] if self.argv else "")

    def save(self, run_dir: Path) -> None:
        """Write atomically (0600) into the guest's run directory."""
        write_private(run_dir / GUEST_FILE, json.dumps(asdict(self), indent=2))

    @classmethod
    def read(cls, run_dir: Path) -> GuestRecord:
        """The record in ``run_dir``; :class:`StateError` saying what is wrong with it."""
        path = run_dir / GUEST_FILE
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
        except FileNotFoundError:
            raise StateError(f"{path} is missing") from None
        except OSError as exc:
            raise StateError(f"{path} cannot be read: {exc.strerror}") from None
        with os.fdopen(fd, "rb") as f:  # a FIFO planted here must not hang ps or down
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise StateError(f"{path} is not a regular file")
            raw = f.read(MAX_STATE_BYTES + 1)
        try:
            if len(raw) > MAX_STATE_BYTES:
                raise ValueError("it is too large")
            data: dict[str, Any] = json.loads(raw)
            if not isinstance(data, dict):
                raise ValueError("it is not a JSON object")
            _lift_backend_fields(data)
            known = {f.name for f in fields(cls)}
            record = cls(**{k: v for k, v in data.items() if k in known})
            if not is_name(record.lab) or not all(is_name(a) for a in record.address):
                raise ValueError("it names an invalid lab or guest")
            _check_fields(record)
            from kvmlab.runtime.backends import BACKEND_NAMES  # the registry imports this

            if record.backend not in BACKEND_NAMES:
                raise ValueError(f"it names no backend kvmlab has ({printable(record.backend)})")
        except (ValueError, TypeError) as exc:
            raise StateError(f"{path} is not a valid guest record ({exc})") from None
        return record

    def running(self, run_dir: Path) -> bool:
        """Whether this guest still runs, as its backend tells (its QEMU, checked against
        its run directory; a libvirt domain on another host: what libvirt says)."""
        from kvmlab.runtime import backends  # the registry imports this module

        return backends.machine_class(self.backend).running_on_record(self, run_dir)

    def process_here(self) -> bool:
        """Whether the guest's process is on this host, to be looked at by its pid (not for
        a guest inside another, nor for a domain of a libvirtd elsewhere)."""
        from kvmlab.runtime import backends

        return self.via is None and backends.machine_class(self.backend).process_here(self)

    def owner_alive(self) -> bool:
        """Whether the kvmlab command that is launching this guest still runs."""
        return self.owner is not None and alive(self.owner, None, self.owner_start)


MAX_PID = 1 << 22
LATEST = 253402300799.0
"""9999-12-31: no kvmlab record is stamped later."""


def _whole(value: object, low: int, high: int) -> bool:
    if not isinstance(value, int) or isinstance(value, bool):
        return False
    return low <= value <= high


def _seconds(value: object, high: float = LATEST) -> bool:
    if not isinstance(value, int | float) or isinstance(value, bool):
        return False
    return math.isfinite(value) and 0 <= value <= high


def _check_fields(record: GuestRecord) -> None:
    """Every field of a record read from disk, of its type and range (ValueError naming
    the first that is not): a record is a file, and ``ps``, ``down`` and ``exec`` act on
    it."""
    checks: list[tuple[str, bool]] = [
        ("pid", _whole(record.pid, 0, MAX_PID)),
        ("pid_start", record.pid_start is None or _whole(record.pid_start, 0, 1 << 62)),
        ("argv", isinstance(record.argv, list) and all(isinstance(a, str) for a in record.argv)),
        ("accel", record.accel in ("kvm", "tcg")),
        ("accel_reason", isinstance(record.accel_reason, str)),
        ("vcpus", _whole(record.vcpus, 1, 1024)),
        ("memory", _whole(record.memory, 1, 1 << 50)),
        ("started", _seconds(record.started)),
        ("boots_image", isinstance(record.boots_image, bool)),
        ("children", isinstance(record.children, bool)),
        ("via", record.via is None or (isinstance(record.via, str) and _address(record.via))),
        ("marker", record.marker is None or isinstance(record.marker, str)),
        (
            "boot",
            isinstance(record.boot, dict)
            and all(isinstance(k, str) and _seconds(v, 1e7) for k, v in record.boot.items()),
        ),
        ("state", record.state in ("launching", "running")),
        ("owner", record.owner is None or _whole(record.owner, 1, MAX_PID)),
        ("owner_start", record.owner_start is None or _whole(record.owner_start, 0, 1 << 62)),
        ("migrations", _whole(record.migrations, 0, 1 << 20)),
        ("backend", isinstance(record.backend, str)),
        ("backend_fields", isinstance(record.backend_fields, dict)),
        (
            "under_kvm",
            isinstance(record.under_kvm, dict)
            and all(isinstance(k, str) and isinstance(v, str) for k, v in record.under_kvm.items()),
        ),
    ]
    for name, ok in checks:
        if not ok:
            shown = printable(repr(getattr(record, name)))
            raise ValueError(f"its {name} is {shown[:40]}, not a value kvmlab writes")


def _address(text: str) -> bool:
    parts = text.split("/")
    return 2 <= len(parts) <= 5 and all(is_name(p) for p in parts)


LEGACY_LIBVIRT_FIELDS = ("uri", "domain", "token", "persistent", "serial_log")
"""Where records before the backend sub-record kept the libvirt backend's fields."""


def _lift_backend_fields(data: dict[str, Any]) -> None:
    """A record written before ``backend_fields`` existed: its libvirt fields moved there."""
    legacy = {k: data.pop(k) for k in LEGACY_LIBVIRT_FIELDS if k in data}
    if legacy and not data.get("backend_fields"):
        data["backend_fields"] = {k: v for k, v in legacy.items() if v is not None}


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
        rec = self.record
        if rec is not None and rec.via is not None:
            return []
        found = set(find_marked(f"{self.run_dir}/"))
        if rec is not None and rec.pid > 0 and rec.process_here() and rec.running(self.run_dir):
            found.add(rec.pid)
        return sorted(found)

    def state(self) -> str:
        """``running``, ``launching``, ``orphaned`` (its ``up`` died), ``dead``, ``unreadable``."""
        rec = self.record
        if rec is None:
            return "unreadable"
        if not rec.process_here():
            if rec.running(self.run_dir):
                return "running"
            return "launching" if rec.state == "launching" and rec.owner_alive() else "dead"
        if not self.processes():
            return "dead"
        if rec.state == "launching":
            return "launching" if rec.owner_alive() else "orphaned"
        return "running"


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
                found.append(GuestEntry(self.lab, here, address, GuestRecord.read(here)))
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
