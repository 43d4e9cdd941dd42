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
import shlex
import shutil
import signal
import subprocess
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path

from kvmlab.errors import HostError, ToolMissing, UsageError, printable
from kvmlab.proc.confined import checked_run_root, create_owned, remove_owned, write_private
from kvmlab.proc.processes import alive, start_time, terminate
from kvmlab.spec.names import is_name

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


@dataclass
class PrivateDaemon:
    """One private libvirtd, on record in ``<run root>/.libvirtd/<name>/daemon.json``."""

    name: str
    pid: int = 0
    pid_start: int | None = None
    tcp_port: int | None = None
    mnt_ns: str | None = None
    """Its mount namespace (``mnt:[inode]``): its QEMUs are found by it even after it died."""
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
        return self.root / "sock" / "libvirt-sock"

    @property
    def uri(self) -> str:
        """The URI of its unix socket (libvirt's RPC protocol, like a remote host's)."""
        return f"qemu+unix:///system?socket={self.socket}"

    @property
    def tcp_uri(self) -> str | None:
        host = f"[{self.listen}]" if ":" in self.listen else self.listen
        return f"qemu+tcp://{host}:{self.tcp_port}/system" if self.tcp_port else None

    def running(self) -> bool:
        return self.pid > 0 and alive(self.pid, "libvirtd", self.pid_start)

    def save(self) -> None:
        write_private(self.root / RECORD, json.dumps(asdict(self), indent=2))

    @classmethod
    def read(cls, name: str) -> PrivateDaemon:
        check_name(name)
        daemon = cls(name)
        try:
            data = json.loads((daemon.root / RECORD).read_text())
        except (OSError, ValueError):
            return daemon
        known = {"pid", "pid_start", "tcp_port", "mnt_ns", "kvm_hidden", "listen", "netns"}
        fields = {k: v for k, v in data.items() if k in known}
        # a record is a file: what names an address or a namespace is checked again
        listen, netns = fields.get("listen", "127.0.0.1"), fields.get("netns")
        if not isinstance(listen, str) or not _plain_address(listen):
            fields["listen"] = "127.0.0.1"
        if netns is not None and not (isinstance(netns, str) and is_name(netns)):
            fields["netns"] = None
        return cls(name, **fields)


def check_name(name: str) -> None:
    if not is_name(name):
        raise UsageError(
            f"private libvirtd name {name!r}: use lower-case letters, digits "
            "and dashes, starting with a letter"
        )


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
    own (libvirt refuses a migration between daemons that report the same one)."""
    etc = root / "etc"
    etc.mkdir(mode=0o755)
    (etc / "qemu.conf").write_text(
        '# kvmlab private daemon\nnamespaces = []\nstdio_handler = "file"\n'
    )
    lines = [
        "# kvmlab private daemon",
        f'unix_sock_dir = "{root / "sock"}"',
        'unix_sock_rw_perms = "0700"',
        'unix_sock_ro_perms = "0700"',
        'unix_sock_admin_perms = "0700"',
        "listen_tls = 0",
        f'log_outputs = "3:file:{root / "libvirtd.log"}"',
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
    on ``listen``); its record. Refuses a second one of that name."""
    check_name(name)
    listen = check_network(tcp_port, listen, netns)
    if shutil.which("libvirtd") is None:
        raise ToolMissing(
            "libvirtd",
            "apt-get install libvirt-daemon-system libvirt-daemon-driver-qemu (make deps does)",
        )
    daemon = PrivateDaemon.read(name)
    if daemon.running():
        raise UsageError(f"private libvirtd {name} runs already ({daemon.uri})")
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
    if daemon.root.exists():
        remove_owned(daemon.root)
    create_owned(daemon.root.parent, "private libvirtd daemons")
    create_owned(daemon.root, f"private libvirtd {name}")
    root = daemon.root
    for sub in ("run", "lib/qemu", "lib/images", "cache/qemu", "log/qemu", "sock"):
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
        f"mount --bind {shlex.quote(str(root / src))} {dst}"
        for src, dst in zip(("etc", "run", "lib", "cache", "log"), MOUNTS, strict=True)
    ]
    if daemon.kvm_hidden and user is not None:
        # libvirt checks /dev/kvm as its QEMU user and re-probes QEMU at every define when
        # that differs from what QEMU found: give this daemon a /dev/kvm its user can open
        # (a node on a tmpfs of its own namespace; the host's node is not touched).
        rdev = Path("/dev/kvm").stat().st_rdev
        dev = root / "dev"
        dev.mkdir()
        binds += [
            f"mount -t tmpfs -o mode=0755,size=64k kvmlab-dev {dev}",
            f"mknod -m 0660 {dev}/kvm c {os.major(rdev)} {os.minor(rdev)}",
            f"chgrp {user[1]} {dev}/kvm",
            f"mount --bind {dev}/kvm /dev/kvm",
        ]
    listen_flag = " -l" if tcp_port else ""  # its pid file in its own /run/libvirt
    daemon_argv = "exec libvirtd -f /etc/libvirt/libvirtd.conf -p /run/libvirt/libvirtd.pid"
    script = " && ".join([*binds, daemon_argv + listen_flag])
    propagation = "private" if whole_root else "unchanged"  # a chroot: checked above
    log = (root / "daemon.out").open("wb")
    # nsenter, not `ip netns exec`: that also remounts / as a slave, which fails where /
    # is no mount point (a chroot)
    inside = ["nsenter", f"--net={NETNS_DIR / netns}", "--"] if netns else []
    proc = subprocess.Popen(
        [*inside, "unshare", "--mount", f"--propagation={propagation}", "sh", "-c", script],
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    log.close()
    daemon.pid, daemon.pid_start = proc.pid, start_time(proc.pid)
    daemon.save()
    deadline = time.monotonic() + START_TIMEOUT
    while not daemon.socket.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            tail = (root / "daemon.out").read_text(errors="replace")[-2000:]
            log_tail = _tail(root / "libvirtd.log")
            stop(name)
            raise HostError(
                f"private libvirtd {name} did not start: {tail.strip() or '?'}",
                [f"libvirtd.log: {line}" for line in log_tail],
            )
        time.sleep(0.1)
    with contextlib.suppress(OSError):
        daemon.mnt_ns = str(Path(f"/proc/{daemon.pid}/ns/mnt").readlink())
        daemon.save()
    return daemon


def _tail(path: Path, lines: int = 5) -> list[str]:
    try:
        return path.read_text(errors="replace").splitlines()[-lines:]
    except OSError:
        return []


def stop(name: str) -> bool:
    """Destroy the daemon's domains, stop it and remove its directory; False if it was not
    running. A name with no daemon on record (nothing to stop or remove) is refused."""
    daemon = PrivateDaemon.read(name)
    if not os.path.lexists(daemon.root):
        raise UsageError(
            f"no private libvirtd named {name}; kvmlab libvirtd list shows the daemons on record"
        )
    ran = daemon.running()
    if ran:
        _destroy_domains(daemon)
        terminate(daemon.pid, "libvirtd", grace=10.0, started=daemon.pid_start)
    for pid in _qemu_children(daemon):  # its QEMUs outlive a dead daemon
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    if daemon.root.exists():
        remove_owned(daemon.root)
    return ran


def _destroy_domains(daemon: PrivateDaemon) -> None:
    """Its domains' QEMUs outlive libvirtd: they are destroyed first (they are kvmlab's)."""
    import libvirt

    try:
        conn = libvirt.open(daemon.uri)
    except libvirt.libvirtError:
        return  # its QEMUs are killed by namespace
    try:
        domains = conn.listAllDomains(0)
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
        conn.close()


def _qemu_children(daemon: PrivateDaemon) -> list[int]:
    """QEMUs whose parent is the daemon (libvirt daemonizes them: their parent is init, so
    they are found by mount namespace instead)."""
    ns = Path(daemon.mnt_ns) if daemon.mnt_ns else None
    if ns is None:
        return []
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == daemon.pid:
            continue
        try:
            if (entry / "ns" / "mnt").readlink() == ns and "qemu-system" in (
                entry / "cmdline"
            ).read_text(errors="replace"):
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def running() -> list[PrivateDaemon]:
    """Every private daemon on record."""
    base = checked_run_root(create=False) / DIR
    if not base.is_dir():
        return []
    return [PrivateDaemon.read(p.name) for p in sorted(base.iterdir()) if is_name(p.name)]
