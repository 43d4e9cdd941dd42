"""A guest's record: what ``kvmlab up`` leaves in the guest's run directory (``guest.json``)
for ``ps``, ``exec``, ``console``, ``migrate`` and ``down``, written before its process
exists and read back field by field.

This module knows the file and its fields only: which backend runs the guest and whether
it still runs are the registry's to say (:mod:`kvmlab.runtime.backends`), which reads
records and is not read by them.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import re
import stat
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from kvmlab.errors import StateError, printable
from kvmlab.proc.confined import write_private
from kvmlab.proc.processes import alive
from kvmlab.spec.names import is_name

GUEST_FILE = "guest.json"
MAX_STATE_BYTES = 1 << 20


@dataclass(frozen=True)
class GuestNic:
    """A NIC of the guest on a host-side path kvmlab probes: a vhost-user NIC (``where``:
    its socket) or a tap (``where``: the tap's name), with the guest's MAC on it."""

    kind: str
    """``vhost-user`` or ``tap``."""
    where: str
    mac: str


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
    migratable: bool = False
    """Whether the guest boots the self-contained image (its probe port, ``kvmlab-dirty``,
    no host share): what ``kvmlab migrate`` needs."""
    nics: list[GuestNic] = field(default_factory=list)
    """Its vhost-user and tap NICs, in order (the packet-path probe finds the guest's
    port on the lab's switch or network by them)."""

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

    def owner_alive(self) -> bool:
        """Whether the kvmlab command that is launching this guest still runs."""
        return self.owner is not None and alive(self.owner, None, self.owner_start)

    def save(self, run_dir: Path) -> None:
        """Write atomically (0600) into the guest's run directory."""
        write_private(run_dir / GUEST_FILE, json.dumps(asdict(self), indent=2))

    @classmethod
    def read(cls, run_dir: Path) -> GuestRecord:
        """The record in ``run_dir``; :class:`StateError` saying what is wrong with it.

        Whether kvmlab has the backend it names is the registry's check
        (:func:`kvmlab.runtime.backends.kind_of`), made wherever a record is acted on."""
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
            _lift_guest_facts(data)
            known = {f.name for f in fields(cls)}
            record = cls(**{k: v for k, v in data.items() if k in known})
            if not is_name(record.lab) or not all(is_name(a) for a in record.address):
                raise ValueError("it names an invalid lab or guest")
            _check_fields(record)
            record.nics = [GuestNic(**nic) for nic in record.nics]  # type: ignore[arg-type]
        except (ValueError, TypeError) as exc:
            raise StateError(f"{path} is not a valid guest record ({exc})") from None
        return record


def invalid(run_dir: Path, why: str) -> StateError:
    """The error for a record that reads but cannot be acted on (``why``: what is wrong)."""
    return StateError(f"{run_dir / GUEST_FILE} is not a valid guest record ({why})")


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


def _nic(value: object) -> bool:
    if not isinstance(value, dict) or set(value) != {"kind", "where", "mac"}:
        return False
    return value["kind"] in ("vhost-user", "tap") and all(
        isinstance(value[k], str) for k in ("where", "mac")
    )


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
        ("migratable", isinstance(record.migratable, bool)),
        ("nics", isinstance(record.nics, list) and all(_nic(n) for n in record.nics)),
    ]
    for name, ok in checks:
        if not ok:
            shown = printable(repr(getattr(record, name)))
            raise ValueError(f"its {name} is {shown[:40]}, not a value kvmlab writes")


def _address(text: str) -> bool:
    """A guest's address within its lab (``l1``, ``l1/l2``): a guest hypervisor's, as a
    nested guest's ``via`` names it."""
    parts = text.split("/")
    return 1 <= len(parts) <= 5 and all(is_name(p) for p in parts)


LEGACY_LIBVIRT_FIELDS = ("uri", "domain", "token", "persistent", "serial_log")
"""Where records before the backend sub-record kept the libvirt backend's fields."""


def _lift_backend_fields(data: dict[str, Any]) -> None:
    """A record written before ``backend_fields`` existed: its libvirt fields moved there."""
    legacy = {k: data.pop(k) for k in LEGACY_LIBVIRT_FIELDS if k in data}
    if legacy and not data.get("backend_fields"):
        data["backend_fields"] = {k: v for k, v in legacy.items() if v is not None}


LEGACY_PROBE_PORT = "org.kvmlab.probe.0"
"""The probe port's name, as records before ``migratable`` show it in their command line."""


def _lift_guest_facts(data: dict[str, Any]) -> None:
    """A record written before ``migratable`` and ``nics`` existed (a lab an earlier kvmlab
    brought up): both read once from the command line it was started with, as that kvmlab
    rendered it."""
    argv = data.get("argv")
    if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
        return  # the field check names it
    if "migratable" not in data:
        data["migratable"] = any(LEGACY_PROBE_PORT in arg for arg in argv)
    if "nics" not in data:
        data["nics"] = [asdict(nic) for nic in argv_nics(argv)]


_ARG_PAIRS = re.compile(r"([a-z-]+)=([^,]*)")


def argv_nics(argv: list[str]) -> list[GuestNic]:
    """A QEMU command line's vhost-user and tap NICs, in order, read as kvmlab renders them
    (chardev -> netdev -> device): only for records from before :attr:`GuestRecord.nics`."""
    chardevs: dict[str, str] = {}
    netdevs: list[tuple[str, str, str]] = []
    macs: dict[str, str] = {}
    for flag, value in itertools.pairwise(argv):
        kind, _, rest = value.partition(",")
        opts = dict(_ARG_PAIRS.findall(rest))
        if flag == "-chardev" and kind == "socket" and "path" in opts:
            chardevs[opts.get("id", "")] = opts["path"]
        elif flag == "-netdev" and kind == "vhost-user" and "chardev" in opts:
            netdevs.append((kind, opts.get("id", ""), opts["chardev"]))
        elif flag == "-netdev" and kind == "tap" and "ifname" in opts:
            netdevs.append((kind, opts.get("id", ""), opts["ifname"]))
        elif flag == "-device" and "netdev" in opts and "mac" in opts:
            macs[opts["netdev"]] = opts["mac"]
    out = []
    for kind, netdev, key in netdevs:
        where = chardevs.get(key) if kind == "vhost-user" else key
        if where is not None and netdev in macs:
            out.append(GuestNic(kind, where, macs[netdev]))
    return out
