"""A private libvirtd: kvmlab's own daemon beside (never instead of) the system one.

It runs in a mount namespace of its own where ``/etc/libvirt``, ``/run/libvirt``,
``/var/lib/libvirt``, ``/var/cache/libvirt`` and ``/var/log/libvirt`` are directories of
kvmlab's run directory, so it shares no state, config, domain or socket with the system's
libvirtd. Its RPC socket is in that run directory (``qemu+unix:///system?socket=...``);
with ``tcp_port`` it also listens on 127.0.0.1 without authentication (a stand-in for a
second host: any local user can then drive it, so only when asked). With ``netns`` it runs
in that network namespace (made by ``ip netns add``) and listens on ``listen``, an address
there: a "second host" that kvmlab reaches only through its URI and the network, as it
would another machine. Tests and one-machine migrations use it; ``kvmlab libvirtd
start|stop|list`` manages it.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import pwd
import shutil
import socket
import stat
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, NoReturn
from urllib.parse import quote

from kvmlab.bounded import read_at_most
from kvmlab.errors import HostError, KvmlabError, StateError, ToolMissing, UsageError, printable
from kvmlab.proc.confined import (
    MARKER,
    checked_run_root,
    create_owned,
    remove_owned,
    write_private,
)
from kvmlab.proc.processes import alive, cmdline, start_time, terminate
from kvmlab.render.runfiles import UNIX_PATH_MAX
from kvmlab.runtime.libvirt import nsinit
from kvmlab.spec.names import is_name, lab_name

MOUNTS = (
    "/etc/libvirt",
    "/run/libvirt",
    "/var/lib/libvirt",
    "/var/cache/libvirt",
    "/var/log/libvirt",
)
RECORD = "daemon.json"
DIR = ".libvirtd"
HOST_UUID_NS = uuid.UUID("6b766d6c-6162-5f68-6f73-740000000000")
"""Namespace of the private daemons' host UUIDs (one per daemon name)."""
START_TIMEOUT = 60.0


MAX_RECORD_BYTES = 64 << 10
"""A daemon's record is a few lines of JSON: anything larger is not kvmlab's."""
MAX_PID = 1 << 22
"""The largest pid Linux gives (``pid_max`` is at most 2^22)."""
OLD_KEYS = frozenset({"name", "mnt_ns"})
"""Keys an older kvmlab wrote that say nothing now (a daemon is proven by its mounts)."""


class DaemonRecordError(StateError):
    """A daemon's record cannot be read or is not kvmlab's: nothing in it is acted on."""

    def __init__(self, name: str, message: str) -> None:
        self.name = name
        super().__init__(message)


@dataclass
class PrivateDaemon:
    """One private libvirtd, on record in ``<run root>/.libvirtd/<name>/daemon.json``.

    The record says how to reach it; it never proves which processes are its own. That
    proof is the daemon's mounts (:func:`owned_processes`): only a process whose
    ``/etc/libvirt`` is this daemon's own directory (the same inode, seen through
    ``/proc/PID/root``) is ever signalled, so a reused pid or a reused namespace number
    cannot turn a stop on another program.
    """

    name: str
    pid: int = 0
    pid_start: int | None = None
    tcp_port: int | None = None
    kvm_hidden: str | None = None
    """Why the host's /dev/kvm is closed to libvirt's QEMU user, if it is: the daemon gets
    a node of its own that its QEMU user can open."""
    listen: str = "127.0.0.1"
    """The address its TCP listener binds (with ``tcp_port``)."""
    netns: str | None = None
    """The network namespace it runs in (``ip netns``), or None: this host's."""

    @property
    def root(self) -> Path:
        return checked_run_root(create=False) / DIR / self.name

    @property
    def socket(self) -> Path:
        """Its RPC socket: ``/run/libvirt/libvirt-sock`` in its namespace."""
        return self.root / "run" / "libvirt-sock"

    @property
    def uri(self) -> str:
        """The URI of its unix socket (libvirt's RPC protocol, like a remote host's); the
        path percent-encoded, as libvirt decodes it."""
        return f"qemu+unix:///system?socket={quote(str(self.socket), safe='/')}"

    @property
    def tcp_uri(self) -> str | None:
        host = f"[{self.listen}]" if ":" in self.listen else self.listen
        return f"qemu+tcp://{host}:{self.tcp_port}/system" if self.tcp_port else None

    def running(self) -> bool:
        """Whether this daemon runs: a libvirtd proven to be its own by its mounts
        (:func:`owned_processes`), whatever pid the record names."""
        return any(p.program == "libvirtd" for p in owned_processes(self))

    def save(self) -> None:
        write_private(self.root / RECORD, json.dumps(asdict(self), indent=2))

    @classmethod
    def read(cls, name: str) -> PrivateDaemon:
        """The daemon's record, checked like any input; :class:`DaemonRecordError` names
        the file and what is wrong. No record at all is a daemon with nothing on record."""
        check_name(name)
        daemon = cls(name)
        path = daemon.root / RECORD
        try:
            raw = _read_record(path)
        except OSError as exc:
            raise DaemonRecordError(
                name,
                printable(
                    f"{path}: cannot be read ({exc.strerror}); kvmlab acts on nothing in it "
                    f"(kvmlab libvirtd stop {name} removes it)"
                ),
            ) from None
        if raw is None:
            return daemon
        try:
            data = json.loads(raw)
            return cls(name, **_checked_fields(data))
        except (ValueError, RecursionError) as exc:
            if isinstance(exc, RecursionError):
                why = "not JSON (nested too deep)"
            else:
                why = "not JSON" if isinstance(exc, json.JSONDecodeError) else str(exc)
            raise DaemonRecordError(
                name,
                printable(
                    f"{path}: {why}; kvmlab acts on nothing in it (kvmlab libvirtd stop "
                    f"{name} removes it)"
                ),
            ) from None


def _read_record(path: Path) -> bytes | None:
    """The record's bytes (a regular file, not a link, at most :data:`MAX_RECORD_BYTES`),
    or None when there is none."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ValueError("not a regular file")
        data = read_at_most(fd, MAX_RECORD_BYTES)
    except ValueError as exc:
        raise OSError(0, str(exc)) from None
    finally:
        os.close(fd)
    if data is None:
        raise OSError(0, f"larger than {MAX_RECORD_BYTES >> 10} KiB")
    return data


def _checked_fields(data: object) -> dict[str, Any]:
    """The record's fields, each of its type and range; ValueError says the first wrong."""
    if not isinstance(data, dict):
        raise ValueError("not a JSON object of a daemon's record")
    unknown = sorted(k for k in data if k not in _FIELDS and k not in OLD_KEYS)
    if unknown:
        raise ValueError(f"{unknown[0][:40]!r} is not a key of a daemon's record")
    fields = {k: v for k, v in data.items() if k in _FIELDS}
    for key, check in _FIELDS.items():
        if key in fields and not check(fields[key]):
            raise ValueError(f"{key} is {_brief(fields[key])}, not {_WANTED[key]}")
    return fields


def _int_in(low: int, high: int) -> Callable[[object], bool]:
    return lambda v: isinstance(v, int) and not isinstance(v, bool) and low <= v <= high


def _optional(check: Callable[[object], bool]) -> Callable[[object], bool]:
    return lambda v: v is None or check(v)


_FIELDS: dict[str, Callable[[object], bool]] = {
    "pid": _int_in(0, MAX_PID),
    "pid_start": _optional(_int_in(0, 1 << 62)),
    "tcp_port": _optional(_int_in(1024, 65535)),
    "kvm_hidden": _optional(lambda v: isinstance(v, str) and len(v) <= 300),
    "listen": lambda v: isinstance(v, str) and _plain_address(v),
    "netns": _optional(lambda v: isinstance(v, str) and is_name(v)),
}
_WANTED = {
    "pid": f"a process id (0 to {MAX_PID})",
    "pid_start": "a start time in clock ticks",
    "tcp_port": "a TCP port from 1024 to 65535",
    "kvm_hidden": "a short text",
    "listen": "an IP address",
    "netns": "a namespace name",
}


def _brief(value: object) -> str:
    text = json.dumps(value)
    return text if len(text) <= 30 else f"{text[:27]}..."


def check_name(name: str) -> None:
    """Refuse a daemon name that is not a name (it becomes a directory)."""
    lab_name(name, "private libvirtd name")


def _qemu_user() -> tuple[int, int] | None:
    for user in ("libvirt-qemu", "qemu"):
        try:
            entry = pwd.getpwnam(user)
        except KeyError:
            continue
        return entry.pw_uid, entry.pw_gid
    return None


def kvm_blocked() -> str | None:
    """Why libvirt's QEMU user cannot open /dev/kvm (libvirt then re-probes QEMU at every
    define, ~90 s on a slow host, and cannot use KVM), or None."""
    user = _qemu_user()
    try:
        st = Path("/dev/kvm").stat()
    except OSError:
        return None
    if user is None:
        return None
    uid, gid = user
    groups = set(os.getgrouplist(pwd.getpwuid(uid).pw_name, gid))
    ok = (
        (st.st_uid == uid and st.st_mode & 0o600 == 0o600)
        or (st.st_gid in groups and st.st_mode & 0o060 == 0o060)
        or st.st_mode & 0o006 == 0o006
    )
    if ok:
        return None
    return (
        f"/dev/kvm (mode {st.st_mode & 0o777:o}, gid {st.st_gid}) is closed to libvirt's "
        f"QEMU user (uid {uid})"
    )


def _shared_parent(target: str) -> str | None:
    """The mount point holding ``target`` if that mount propagates (a bind mount on it in
    our namespace would appear in the host's too)."""
    best, shared = "", False
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split(" - ")[0].split()
        point, optional = fields[4], fields[6:]
        if (target == point or target.startswith(point.rstrip("/") + "/")) and len(point) >= len(
            best
        ):
            best, shared = point, any(o.startswith("shared:") for o in optional)
    return best if shared else None


def check_network(tcp_port: int | None, listen: str, netns: str | None) -> str:
    """The listen address, normalised; refused (UsageError) when it is not a plain IP
    address (no zone: it is written into libvirtd.conf), is a wildcard, is given without a
    TCP port, is not loopback outside a namespace of its own, or names a namespace that
    does not exist."""
    try:
        address = ipaddress.ip_address(listen)
    except ValueError:
        address = None
    if address is None or "%" in listen:
        raise UsageError(
            f"--listen {printable(repr(listen[:60]))}: give an IP address (e.g. 10.77.0.2)"
        )
    if address.is_unspecified:
        raise UsageError(f"--listen {listen}: a wildcard; give the one address to listen on")
    if not tcp_port and (netns is not None or not address.is_loopback):
        raise UsageError("--listen and --netns go with --tcp-port (the daemon's TCP listener)")
    if netns is None and not address.is_loopback:
        raise UsageError(
            f"--listen {listen} without --netns: an unauthenticated root daemon on this "
            "host's network; run it in a network namespace of its own (--netns NAME)"
        )
    if netns is not None:
        if not is_name(netns):
            raise UsageError(
                f"--netns {printable(repr(netns[:60]))}: a namespace name of lower-case "
                "letters, digits and dashes"
            )
        if not (NETNS_DIR / netns).exists():
            raise UsageError(
                f"--netns {netns}: no such network namespace (ip netns add {netns}, and give "
                "it an address for --listen)"
            )
    return str(address)


def _plain_address(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return "%" not in text


NETNS_DIR = Path("/run/netns")
"""Where ``ip netns`` keeps the named network namespaces."""


def _config(root: Path, name: str, tcp_port: int | None, listen: str) -> None:
    """A configuration of its own, written whole: nothing of the host's (no domains,
    networks or pools to autostart, no listen setting to inherit), and a host UUID of its
    own (libvirt refuses a migration between daemons that report the same one). It names
    no path of the host: its socket and log are in its own ``/run/libvirt`` and
    ``/var/log/libvirt`` (the run directory's ``run`` and ``log``), so a run directory with
    spaces or quotes is never written into libvirt's syntax."""
    etc = root / "etc"
    etc.mkdir(mode=0o755)
    (etc / "qemu.conf").write_text(
        '# kvmlab private daemon\nnamespaces = []\nstdio_handler = "file"\n'
    )
    lines = [
        "# kvmlab private daemon",
        'unix_sock_dir = "/run/libvirt"',
        'unix_sock_rw_perms = "0700"',
        'unix_sock_ro_perms = "0700"',
        'unix_sock_admin_perms = "0700"',
        "listen_tls = 0",
        'log_outputs = "3:file:/var/log/libvirt/libvirtd.log"',
        f'host_uuid = "{uuid.uuid5(HOST_UUID_NS, name)}"',
    ]
    if tcp_port:
        lines += [
            "listen_tcp = 1",
            f'listen_addr = "{listen}"',
            f'tcp_port = "{tcp_port}"',
            'auth_tcp = "none"',
        ]
    else:
        lines += ["listen_tcp = 0"]
    (etc / "libvirtd.conf").write_text("\n".join(lines) + "\n")


def start(
    name: str, tcp_port: int | None = None, listen: str = "127.0.0.1", netns: str | None = None
) -> PrivateDaemon:
    """Start the private daemon ``name`` (in network namespace ``netns``, its TCP listener
    on ``listen``); its record. Refuses a second one of that name, and a TCP port another
    program holds (checked before, and proven after: the daemon itself must listen)."""
    check_name(name)
    listen = check_network(tcp_port, listen, netns)
    if shutil.which("libvirtd") is None:
        raise ToolMissing(
            "libvirtd",
            "apt-get install libvirt-daemon-system libvirt-daemon-driver-qemu (make deps does)",
        )
    daemon = PrivateDaemon(name)
    with _locked():
        return _start(daemon, tcp_port, listen, netns)


def _start(
    daemon: PrivateDaemon, tcp_port: int | None, listen: str, netns: str | None
) -> PrivateDaemon:
    """:func:`start`, under the daemons' lock."""
    name = daemon.name
    _refuse_foreign(daemon)
    if len(os.fsencode(daemon.socket)) > UNIX_PATH_MAX:
        raise UsageError(
            f"private libvirtd {name}: its socket {printable(str(daemon.socket))} would be "
            f"longer than a unix socket's {UNIX_PATH_MAX} bytes; set KVMLAB_RUN_DIR to a "
            "shorter path"
        )
    if left := owned_processes(daemon):
        raise UsageError(
            f"private libvirtd {name} runs already, or left processes ({_listed(left)}); "
            f"kvmlab libvirtd stop {name} stops them"
        )
    if tcp_port and netns is None and (held := _port_holders(tcp_port)):
        raise HostError(
            f"TCP port {tcp_port} is taken on this host ({held}); a private libvirtd needs a "
            "port of its own",
            [f"choose another --tcp-port, or stop what holds {tcp_port}"],
        )
    whole_root = any(
        line.split()[4] == "/" for line in Path("/proc/self/mountinfo").read_text().splitlines()
    )
    # unshare makes every mount private where / is a mount point; in a chroot it cannot,
    # and a bind mount under a shared mount would then show in the host's namespace.
    for target in () if whole_root else (*MOUNTS, "/dev/kvm", str(checked_run_root())):
        shared = _shared_parent(target)
        if shared is not None:
            raise HostError(
                f"cannot give a private libvirtd its own {target} in this chroot: "
                f"the mount {shared} propagates to the host's namespace",
                ["run kvmlab libvirtd outside the chroot"],
            )
    if os.path.lexists(daemon.root):
        remove_owned(daemon.root)
    create_owned(daemon.root.parent, "private libvirtd daemons")
    create_owned(daemon.root, f"private libvirtd {name}")
    root = daemon.root
    for sub in ("run", "lib/qemu", "lib/images", "cache/qemu", "log/qemu"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    for sub in ("run", "lib", "lib/images", "cache", "cache/qemu", "log", "log/qemu"):
        (root / sub).chmod(0o755)
    user = _qemu_user()
    if user is not None:
        os.chown(root / "lib/qemu", *user)
        (root / "lib/qemu").chmod(0o751)
    _config(root, name, tcp_port, listen)
    daemon.tcp_port, daemon.listen, daemon.netns = tcp_port, listen, netns
    daemon.kvm_hidden = kvm_blocked()
    Path("/run/libvirt").mkdir(parents=True, exist_ok=True)
    binds = [
        (str(root / src), dst)
        for src, dst in zip(("etc", "run", "lib", "cache", "log"), MOUNTS, strict=True)
    ]
    kvm = None
    if daemon.kvm_hidden and user is not None:
        rdev = Path("/dev/kvm").stat().st_rdev
        (root / "dev").mkdir()
        kvm = (str(root / "dev"), os.major(rdev), os.minor(rdev), user[1])
    argv = ["libvirtd", "-f", "/etc/libvirt/libvirtd.conf", "-p", "/run/libvirt/libvirtd.pid"]
    argv += ["-l"] if tcp_port else []  # its pid file in its own /run/libvirt
    propagation = "private" if whole_root else "unchanged"  # a chroot: checked above
    # nsenter, not `ip netns exec`: that also remounts / as a slave, which fails where /
    # is no mount point (a chroot)
    inside = ["nsenter", f"--net={NETNS_DIR / netns}", "--"] if netns else []
    # -I: isolated, so neither the current directory nor PYTHON* variables put a module of
    # anyone else's before kvmlab's in this root process (a json.py where kvmlab was run)
    init = [
        sys.executable,
        "-I",
        "-m",
        "kvmlab.runtime.libvirt.nsinit",
        nsinit.plan(binds, kvm, argv),
    ]
    with (root / "daemon.out").open("wb") as log:
        proc = subprocess.Popen(
            [*inside, "unshare", "--mount", f"--propagation={propagation}", "--", *init],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            cwd="/",
        )
    try:
        daemon.pid, daemon.pid_start = proc.pid, start_time(proc.pid)
        daemon.save()
        deadline = time.monotonic() + START_TIMEOUT
        while not _ready(daemon, proc):
            if proc.poll() is not None or time.monotonic() > deadline:
                _failed_start(daemon, proc)
            time.sleep(0.1)
    except BaseException as exc:  # Ctrl-C or SIGTERM mid-start: nothing is left running
        if not isinstance(exc, KvmlabError):
            with contextlib.suppress(KvmlabError, OSError):
                _stop(daemon)
        raise
    return daemon


def _ready(daemon: PrivateDaemon, proc: subprocess.Popen[bytes]) -> bool:
    """Whether the daemon serves: its socket is there, it still runs as itself, and with a
    TCP port it holds that port's listener (libvirtd makes its unix socket first and exits
    when the TCP bind fails)."""
    if not daemon.socket.exists() or proc.poll() is not None or not daemon.running():
        return False
    return not daemon.tcp_port or daemon.tcp_port in listening_ports(daemon.pid)


def _failed_start(daemon: PrivateDaemon, proc: subprocess.Popen[bytes]) -> NoReturn:
    """Stop what started, remove the daemon's state, and say why it did not start."""
    root = daemon.root
    tail = (root / "daemon.out").read_text(errors="replace")[-2000:]
    log_tail = _tail(root / "log" / "libvirtd.log")
    held = ""
    if daemon.tcp_port and any("Address already in use" in line for line in log_tail):
        holders = "" if daemon.netns else _port_holders(daemon.tcp_port)
        held = f"TCP port {daemon.tcp_port} is taken{f' ({holders})' if holders else ''}: "
    if proc.poll() is None:
        terminate(proc.pid, None, grace=5.0, started=daemon.pid_start)
    with contextlib.suppress(KvmlabError):
        _stop(daemon)
    raise HostError(
        f"private libvirtd {daemon.name} did not start: {held}{tail.strip() or '?'}",
        [f"libvirtd.log: {line}" for line in log_tail],
    )


def listening_ports(pid: int) -> set[int]:
    """TCP ports ``pid`` itself listens on, in its own network namespace (its sockets in
    ``/proc/PID/net/tcp{,6}`` in state LISTEN, matched to its descriptors)."""
    inodes = set()
    with contextlib.suppress(OSError):
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            with contextlib.suppress(OSError):
                target = str(fd.readlink())
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
    ports = set()
    for table in ("tcp", "tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
                cols = line.split()
                if len(cols) > 9 and cols[3] == "0A" and cols[9] in inodes:
                    ports.add(int(cols[1].rsplit(":", 1)[1], 16))
    return ports


def _port_holders(port: int) -> str:
    """Who holds TCP ``port`` on this host (``pid 12 (libvirtd)``), or empty when free."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            pass
        else:
            return ""
    from kvmlab.runtime.forwarded_ports import holders

    return ", ".join(holders("tcp", port)) or "by a process kvmlab cannot see"


def _tail(path: Path, lines: int = 5) -> list[str]:
    try:
        return [printable(line) for line in path.read_text(errors="replace").splitlines()[-lines:]]
    except OSError:
        return []


@dataclass(frozen=True)
class Owned:
    """A process proven to be a private daemon's: libvirtd itself or one of its QEMUs."""

    pid: int
    started: int
    program: str


@dataclass
class Stopped:
    """What a stop did: whether the daemon ran, the QEMUs it left that were stopped, and
    why its record was not trusted (if it was not)."""

    was_running: bool
    leftovers: int = 0
    record_problem: str | None = None
    record_pid: int = 0


def stop(name: str) -> Stopped:
    """Destroy the daemon's domains, stop it and its QEMUs, and remove its directory.

    Only processes proven to be this daemon's (:func:`owned_processes`) are signalled; a
    record whose pid is gone or another program's is removed with nothing signalled. A
    name with no daemon on record (nothing to stop or remove) is refused."""
    check_name(name)
    daemon = PrivateDaemon(name)
    if not os.path.lexists(daemon.root):
        raise UsageError(
            f"no private libvirtd named {name}; kvmlab libvirtd list shows the daemons on record"
        )
    with _locked():
        _refuse_foreign(daemon)
        return _stop(daemon)


def _stop(daemon: PrivateDaemon) -> Stopped:
    """:func:`stop`, under the daemons' lock, of a directory that is kvmlab's."""
    name = daemon.name
    outcome = Stopped(False)
    try:
        outcome.record_pid = PrivateDaemon.read(name).pid
    except DaemonRecordError as exc:
        outcome.record_problem = str(exc)
    owned = owned_processes(daemon)
    daemons = [p for p in owned if p.program == "libvirtd"]
    if daemons:
        outcome.was_running = True
        _destroy_domains(daemon)
        for p in daemons:
            terminate(p.pid, None, grace=10.0, started=p.started)
    left = [p for p in owned_processes(daemon) if p.program != "libvirtd"]
    outcome.leftovers = len(left) if not daemons else 0
    for p in left:
        terminate(p.pid, None, grace=5.0, started=p.started)
    if survivors := owned_processes(daemon):
        raise HostError(
            f"private libvirtd {name}: {_listed(survivors)} did not stop; its state is kept",
            [
                f"kill -9 {' '.join(str(p.pid) for p in survivors)}, then "
                f"kvmlab libvirtd stop {name}"
            ],
        )
    if os.path.lexists(daemon.root):
        remove_owned(daemon.root)
    return outcome


def _listed(processes: Sequence[Owned]) -> str:
    return ", ".join(f"pid {p.pid} ({p.program})" for p in processes)


def _destroy_domains(daemon: PrivateDaemon) -> None:
    """Its domains' QEMUs outlive libvirtd: they are destroyed first (they are kvmlab's)."""
    import libvirt

    from kvmlab.runtime.libvirt.conn import LibvirtFailure, open_uri

    try:
        if not stat.S_ISSOCK(os.lstat(daemon.socket).st_mode):
            return  # not the socket the daemon made (a link, a file): asked nothing
        conn = open_uri(daemon.uri)
    except (LibvirtFailure, OSError):
        return  # its QEMUs are found by its mounts
    try:
        domains = conn.listAllDomains(0) if _answers_as(conn, daemon) else []
    except libvirt.libvirtError:
        domains = []
    try:
        for dom in domains:
            try:
                if dom.isActive():
                    dom.destroy()
                if dom.isPersistent():
                    dom.undefine()
            except libvirt.libvirtError:
                continue
    finally:
        with contextlib.suppress(libvirt.libvirtError):
            conn.close()


def _answers_as(conn: Any, daemon: PrivateDaemon) -> bool:
    """Whether the daemon behind ``conn`` is ``daemon``: its host UUID is the one kvmlab
    wrote into that daemon's configuration alone (a socket replaced by another daemon's,
    the system's included, answers with another)."""
    import libvirt

    try:
        caps = conn.getCapabilities()
    except libvirt.libvirtError:
        return False
    return f"<uuid>{uuid.uuid5(HOST_UUID_NS, daemon.name)}</uuid>" in caps


@contextlib.contextmanager
def _locked() -> Iterator[None]:
    """One ``kvmlab libvirtd start`` or ``stop`` at a time (a lock file in the run root)."""
    import fcntl

    path = checked_run_root() / ".libvirtd.lock"
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _own_dir(daemon: PrivateDaemon) -> str | None:
    """Why ``daemon``'s directory is not one kvmlab made (a link, not a directory, no
    marker), or None when it is."""
    for path in (daemon.root.parent, daemon.root):
        try:
            mode = os.lstat(path).st_mode
        except FileNotFoundError:
            return None
        if stat.S_ISLNK(mode):
            return f"{path} is a symbolic link"
        if not stat.S_ISDIR(mode):
            return f"{path} is not a directory"
    if not (daemon.root / MARKER).is_file():
        return f"{daemon.root} has no {MARKER} marker"
    return None


def _refuse_foreign(daemon: PrivateDaemon) -> None:
    """Refuse, before anything is signalled or asked, a daemon directory kvmlab did not
    make."""
    if why := _own_dir(daemon):
        raise StateError(
            printable(
                f"private libvirtd {daemon.name}: {why}, not a daemon directory kvmlab made; "
                "kvmlab leaves it alone (remove it by hand if it is yours)"
            )
        )


def _identity(path: Path) -> tuple[int, int] | None:
    """(device, inode) of a real directory at ``path``, or None."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino) if stat.S_ISDIR(st.st_mode) else None


def _sees(pid: int, etc: tuple[int, int]) -> bool:
    """Whether ``pid``'s ``/etc/libvirt`` is the directory ``etc`` (through its own root
    and mount namespace)."""
    try:
        st = Path(f"/proc/{pid}/root/etc/libvirt").stat()
    except OSError:
        return False
    return (st.st_dev, st.st_ino) == etc


def owned_processes(daemon: PrivateDaemon) -> list[Owned]:
    """The live processes proven to be this daemon's: libvirtd or a QEMU whose
    ``/etc/libvirt`` is the daemon's own configuration directory, a bind mount only its
    mount namespace has. Neither a pid, nor a command line, nor a namespace number (Linux
    reuses them) is taken as proof."""
    mine = _identity(daemon.root / "etc") if _own_dir(daemon) is None else None
    if mine is None:
        return []
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        pid = int(entry.name)
        line = cmdline(pid)
        program = Path(line.split(" ", 1)[0]).name if line else ""
        if program != "libvirtd" and not program.startswith("qemu-system"):
            continue
        started = start_time(pid)
        if started is None or not alive(pid, None, started) or not _sees(pid, mine):
            continue
        found.append(Owned(pid, started, "libvirtd" if program == "libvirtd" else "qemu"))
    return found


def running() -> list[PrivateDaemon | DaemonRecordError]:
    """Every private daemon on record (a record that cannot be read as its error)."""
    base = checked_run_root(create=False) / DIR
    if not base.is_dir():
        return []
    out: list[PrivateDaemon | DaemonRecordError] = []
    for p in sorted(base.iterdir()):
        if not is_name(p.name):
            continue
        if why := _own_dir(PrivateDaemon(p.name)):
            text = f"{why}, not a daemon directory kvmlab made; kvmlab leaves it alone"
            out.append(DaemonRecordError(p.name, printable(text)))
            continue
        try:
            out.append(PrivateDaemon.read(p.name))
        except DaemonRecordError as exc:
            out.append(exc)
    return out
