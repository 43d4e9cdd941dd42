"""A lab's guests on the libvirt backend: checked, published, rendered for the libvirt in
front of kvmlab, and handed to :mod:`kvmlab.runtime.lab` as :class:`LibvirtMachine`\\ s."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import stat
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar

from kvmlab.errors import Problem, SpecError, UsageError
from kvmlab.progress import Progress
from kvmlab.render import render_libvirt
from kvmlab.render.devices.disk import SEED_IMAGE
from kvmlab.render.libvirt_caps import LibvirtCaps, version_text
from kvmlab.render.target import Target
from kvmlab.runtime.hostview import qemu_argv
from kvmlab.runtime.libvirt.conn import LibvirtFailure, capabilities, is_local, open_uri
from kvmlab.runtime.libvirt.machine import LibvirtMachine
from kvmlab.runtime.libvirt.publish import (
    hold,
    publish,
    publish_seed,
    release,
    unpublish_unused,
)
from kvmlab.runtime.machine import Backend, Capabilities, MachineConfig
from kvmlab.spec import Guest, LoadedLab, TapNic, VhostUserNic
from kvmlab.spec.rules import guest_key


def refusals(
    loaded: LoadedLab,
    only: str | None = None,
    start_inner: bool = True,
    uri_of: Callable[[Guest], str] | None = None,
) -> list[Problem]:
    """What the libvirt backend cannot run yet, each naming the lab file and key
    (``uri_of``: the daemon of each top-level guest; None: all on this host)."""
    lab, file = loaded.lab, str(loaded.path)
    out: list[Problem] = []
    for name, guest in lab.guests.items():
        if only not in (None, name):
            continue
        key = guest_key((name,))
        local = uri_of is None or is_local(uri_of(guest))
        if guest.nested and guest.guests and start_inner and not local:
            out.append(
                Problem(
                    file,
                    f"{key}.guests",
                    "guests inside a guest hypervisor "
                    "run on a libvirt daemon of this host only (kvmlab reaches "
                    "their agents through a socket of the guest hypervisor's "
                    "QEMU), or on the qemu backend",
                )
            )
        for i, nic in enumerate(guest.nics):
            if isinstance(nic, TapNic) and nic.network is not None and not local:
                out.append(
                    Problem(
                        file,
                        f"{key}.nics[{i}]",
                        "NICs on the lab's networks "
                        "join its namespace on this host: a libvirt daemon of "
                        "this host (or the qemu backend)",
                    )
                )
            elif isinstance(nic, VhostUserNic) and not local:
                out.append(
                    Problem(
                        file,
                        f"{key}.nics[{i}]",
                        "vhost-user NICs need their "
                        "switch on the guest's host: a libvirt daemon of this host "
                        "(or the qemu backend)",
                    )
                )
    return out


def why_unreachable(path: Path, uid: int, gid: int) -> str | None:
    """Why user ``uid``/``gid`` cannot read and write ``path`` (None: it can, or libvirt
    makes it so: files are relabelled by libvirt's DAC driver, directories are not)."""
    for parent in reversed(path.parents):
        try:
            st = parent.stat()
        except OSError:
            return f"{parent} cannot be read"
        bits = (
            stat.S_IXUSR if st.st_uid == uid else stat.S_IXGRP if st.st_gid == gid else stat.S_IXOTH
        )
        if not st.st_mode & bits:
            return f"directory {parent} is closed to uid {uid} (mode {st.st_mode & 0o7777:o})"
    return None


def backing_chain(path: Path, fmt: str) -> list[Path]:
    """A disk image and every backing file under it, read as the lab declares it (``fmt``:
    a raw disk is never probed, so a guest cannot name a host file as its backing); just
    the image when ``qemu-img`` cannot say (QEMU's own error follows at start)."""
    if fmt != "qcow2":
        return [path]
    argv = ["qemu-img", "info", "-U", "-f", fmt, "--backing-chain", "--output=json", str(path)]
    try:
        proc = subprocess.run(
            argv, capture_output=True, text=True, timeout=60, check=True, stdin=subprocess.DEVNULL
        )
        chain = json.loads(proc.stdout)
    except (OSError, subprocess.SubprocessError, ValueError):
        return [path]
    files = [str(i["filename"]) for i in chain if isinstance(i, dict) and "filename" in i]
    plain = [Path(f) for f in files if f.startswith("/")]  # not json:, nbd://, ...
    return plain or [path]


def _check_disk(
    index: int, path: Path, fmt: str, user: tuple[int, int], uri: str, guest: str
) -> None:
    """Refuse a disk (or a backing file of it) libvirt's QEMU user cannot reach."""
    for n, file in enumerate(backing_chain(path, fmt)):
        why = why_unreachable(file, *user)
        if why is None:
            continue
        what = f"disk {index} ({path})" + (f", backing file {file}" if n else "")
        fix = (
            f"make the disk standalone (qemu-img convert -f {fmt} -O qcow2 {path} NEW, "
            "and point the lab at NEW), or move its backing file where every user may enter"
            if n
            else "put the lab's disks under a directory every user may enter, or "
            "run the lab on the qemu backend"
        )
        raise LibvirtFailure(
            f"{what}: libvirt's QEMU user cannot reach it: {why}", uri, guest, [fix]
        )


def _check_taps(guest: Guest, uri: str, name: str) -> None:
    """Refuse a tap the lab names that this host lacks: it is the user's (libvirt takes it
    as it is, ``managed='no'``), and libvirt must never be told to manage a name that may
    be somebody's (libvirt 9.0 deletes a tap it was to manage when the start fails)."""
    for i, nic in enumerate(guest.nics):
        if not isinstance(nic, TapNic) or not nic.ifname or nic.network is not None:
            continue
        if nic.ifname not in {p.name for p in Path("/sys/class/net").iterdir()}:  # not ".."
            mq = " multi_queue" if nic.queues > 1 else ""
            raise LibvirtFailure(
                f"nics[{i}]: tap {nic.ifname} does not exist; on the libvirt backend a tap "
                "the lab names is the user's, taken as it is",
                uri,
                name,
                [
                    f"create it first: ip tuntap add dev {nic.ifname} mode tap{mq}",
                    "or put the NIC on one of the lab's [networks] (kvmlab names its taps)",
                ],
            )


@dataclass
class LibvirtBackend(Backend):
    """The libvirtd(s) running one ``kvmlab up``/``run``'s guests: the one at ``uri``, and
    any other a guest names (``libvirt_uri``: one lab over several hosts)."""

    name: ClassVar[str] = "libvirt"
    capabilities: ClassVar[Capabilities] = Capabilities(
        migrate_lab=False,  # comparisons that bring a lab up again and again: qemu only
        exits_compare=False,
        bench_migrations=False,  # a libvirt guest moves with kvmlab migrate --to URI
    )
    makes_guest_sockets: ClassVar[bool] = False

    uri: str
    persistent: bool = False
    allow_root: bool = False
    """Whether a domain's QEMU may run as root where kvmlab needs it (see
    :meth:`root_reason`); otherwise such a guest is refused before anything starts."""
    _conns: dict[str, Any] = field(default_factory=dict, repr=False)
    _caps: dict[str, LibvirtCaps] = field(default_factory=dict, repr=False)
    _start_inner: bool = field(default=False, repr=False)
    """Whether a guest hypervisor's own guests start in this run (some check said so)."""

    def uri_of(self, guest: Guest) -> str:
        """The daemon that runs a top-level guest."""
        return guest.libvirt_uri or self.uri

    def on_this_host(self, guest: Guest) -> bool:
        """Whether a top-level guest's daemon is on this host (its port forwards bind here)."""
        return is_local(self.uri_of(guest))

    def nested_local(self, loaded: LoadedLab) -> bool:
        """Whether every guest hypervisor with guests inside runs on a daemon of this host."""
        return all(
            is_local(self.uri_of(g)) for g in loaded.lab.guests.values() if g.nested and g.guests
        )

    def connect(self, uri: str | None = None) -> LibvirtCaps:
        """Ask a daemon what it offers (an unreachable URI fails here, before anything)."""
        uri = uri or self.uri
        if uri not in self._conns:
            conn = open_uri(uri)
            self._caps[uri] = capabilities(conn)
            self._conns[uri] = conn
        return self._caps[uri]

    def levels(self, loaded: LoadedLab, wanted: set[str], asked: bool) -> set[str]:
        """All of them on a daemon of this host; L0 and L1 on a remote one (a guest
        hypervisor's own guests are reached through a socket of its QEMU). L2 asked for by
        ``--levels`` of a remote daemon is refused; the default levels leave it out."""
        if self.nested_local(loaded):
            return wanted
        if "L2" in wanted and asked:
            raise UsageError(
                f"{loaded.path}: --levels L2 on a remote libvirt: guests inside a "
                "guest hypervisor run on a libvirt daemon of this host or on the "
                "qemu backend (use --levels L0,L1)"
            )
        return wanted - {"L2"}

    def check_workloads(self, loaded: LoadedLab, migrations: bool) -> None:
        """Migrations run on the qemu backend only (PVP and netcompare run here)."""
        if migrations and not self.capabilities.bench_migrations:
            raise UsageError(
                f"{loaded.path}: migrations run only on the qemu backend so far; "
                "on libvirt leave them out with --only (e.g. --only cpu,memory,disk,"
                "net,boot), or migrate a libvirt guest with kvmlab migrate --to URI"
            )

    def close(self) -> None:
        for conn in self._conns.values():
            conn.close()
        self._conns.clear()

    def facts(self, loaded: LoadedLab) -> dict[str, str]:
        """What a stored run records of the daemons that ran its guests (it connects)."""
        mode = "persistent" if self.persistent else "transient"
        uris = list(
            dict.fromkeys([self.uri, *(self.uri_of(g) for g in loaded.lab.guests.values())])
        )
        caps = [self.connect(uri) for uri in uris]
        facts = {
            "backend": "; ".join(f"{c.label} at {u}" for c, u in zip(caps, uris, strict=True))
            + f" ({mode} domains)",
            "qemu": "; ".join(dict.fromkeys(f"QEMU {version_text(c.qemu_version)}" for c in caps))
            + " (libvirt's)",
        }
        far = [u for u in uris if not is_local(u)]
        if far:
            facts["kvm"] = f"not read: guests run on {', '.join(far)} (remote daemons)"
        return facts

    def check(self, loaded: LoadedLab, only: str | None = None, start_inner: bool = True) -> None:
        """Refuse, before anything starts, what this backend cannot run (``start_inner``
        False: a guest hypervisor's own guests are not started, so not refused); every
        daemon the guests name is asked once, so an unreachable one fails first."""
        problems = refusals(loaded, only, start_inner, self.uri_of)
        if problems:
            raise SpecError(problems)
        far = [self.uri_of(g) for g in loaded.lab.guests.values() if not is_local(self.uri_of(g))]
        if loaded.lab.host_kvm is not None and far:
            raise UsageError(
                f"{loaded.path}: host_kvm is read from this host's /sys/module, and guests "
                f"run on {far[0]}, whose KVM kvmlab cannot read: run kvmlab on that host, "
                "or take host_kvm out of the lab"
            )
        # bench starts them after measuring L1
        self._start_inner = self._start_inner or start_inner
        self._check_root(loaded, only, self._start_inner)
        for name, guest in loaded.lab.guests.items():
            if only in (None, name):
                self.connect(self.uri_of(guest))
                if self.on_this_host(guest):
                    _check_taps(guest, self.uri_of(guest), f"{loaded.lab.name}/{name}")
        self.connect()

    def machine(
        self,
        loaded: LoadedLab,
        path: tuple[str, ...],
        guest: Guest,
        config: MachineConfig,
        progress: Progress,
    ) -> LibvirtMachine:
        """The machine for one guest: image published, XML rendered for this libvirt. Its
        record keeps, as ever, the QEMU command line kvmlab would run it with (``argv``,
        what ``kvmlab up -o json`` and stored runs show; libvirt builds its own)."""
        target = config.target
        assert config.guest is not None and target is not None
        config = replace(config, argv=qemu_argv(loaded, path, config.guest, target))
        return self._machine(guest, config, target, progress)

    def _machine(
        self, guest: Guest, config: MachineConfig, target: Target, progress: Progress
    ) -> LibvirtMachine:
        uri = self.uri_of(guest)
        caps, local = self.connect(uri), is_local(uri)
        if not local:  # this host's /sys/module says nothing of that daemon's KVM
            config = replace(config, under_kvm={})
        token = secrets.token_hex(12)
        as_root = self.root_reason(guest, config.children and self._start_inner)
        if as_root is not None:
            progress.step(f"{config.name}: libvirt runs its QEMU as root: {as_root}")
        target = replace(target, libvirt=caps, libvirt_token=token, libvirt_as_root=as_root)
        if caps.qemu_user is not None and local and as_root is None:
            for i, disk in enumerate(guest.disks):
                _check_disk(
                    i, target.path(disk.path), disk.format, caps.qemu_user, uri, config.name
                )
        if target.image is not None and target.image.share == "virtiofs":
            raise LibvirtFailure(
                "shares the host root by virtiofs, whose daemon libvirt runs "
                "as root and kvmlab cannot mask: refused on this backend",
                uri,
                config.name,
                ["use the 9p image (the default)"],
            )
        render_libvirt(guest, target)  # what libvirt cannot say is refused before uploading
        hold()  # until the domain exists (released by the machine): see publish.LOCK
        try:
            if target.image is not None:
                files = [target.image.kernel, target.image.initrd]
                progress.step(f"publishing the guest image to libvirt ({uri})")
                where = publish(self._conns[uri], uri, files)
                target = replace(
                    target,
                    image=replace(
                        target.image,
                        kernel=where[target.image.kernel],
                        initrd=where[target.image.initrd],
                    ),
                )
            if guest.cloud_init is not None:  # written by the caller into the run directory
                seed = publish_seed(self._conns[uri], uri, config.run_dir / SEED_IMAGE, token)
                target = replace(target, seed_image=seed)
            xml = render_libvirt(guest, target)
        except BaseException:  # Ctrl-C too: nothing uploaded for it stays
            release()
            with contextlib.suppress(Exception):
                unpublish_unused(self._conns[uri])
            raise
        return LibvirtMachine(
            config,
            uri,
            xml,
            target_uuid(target),
            persistent=self.persistent,
            serial_log=str(target.libvirt_log("serial")),
            token=token,
            qemu_uid=0 if as_root else caps.qemu_user[0] if caps.qemu_user else None,
            holds_publish=True,
        )

    def root_reason(self, guest: Guest, start_inner: bool) -> str | None:
        """Why a top-level guest's QEMU must run as root on a daemon of this host, or None:
        vhost-user NICs connect to a switch's sockets in kvmlab's private run directory; a
        guest hypervisor whose guests start runs kvmlab inside, which reads kvmlab's
        install and the guest image through the 9p share of the host root, with the rights
        of the QEMU serving it."""
        uri = self.uri_of(guest)
        user = self.connect(uri).qemu_user
        if user is None or not is_local(uri):
            return None
        sockets = [nic for nic in guest.nics if isinstance(nic, VhostUserNic)]
        if any(n.port for n in sockets):
            return (
                "its vhost-user NICs connect to the lab switch's sockets in kvmlab's "
                "private run directory (0700)"
            )
        if sockets:
            return (
                "its vhost-user NICs connect to the sockets of a switch kvmlab does not "
                "run, which libvirt does not relabel"
            )
        if not (guest.nested and guest.guests and start_inner) or guest.boot != "image":
            return None
        import kvmlab
        from kvmlab.guest.cache import default_root

        for what, path in (
            ("kvmlab's install", Path(sys.prefix)),
            ("kvmlab's Python", Path(os.path.realpath(sys.executable)).parent),
            ("kvmlab's Python", Path(sys.base_prefix)),
            ("kvmlab's source", Path(kvmlab.__file__).resolve().parent),
            ("the guest image cache", default_root()),
        ):
            why = why_unreachable(path / "any", *user)  # the directory and above
            if why:
                return (
                    f"kvmlab inside it reads {what} ({path}) through the host-root "
                    f"share, and libvirt's QEMU user cannot: {why}"
                )
        return None

    def _check_root(self, loaded: LoadedLab, only: str | None, start_inner: bool) -> None:
        """Refuse, before anything starts, a guest that needs QEMU as root unless allowed."""
        if self.allow_root:
            return
        for name, guest in loaded.lab.guests.items():
            why = self.root_reason(guest, start_inner) if only in (None, name) else None
            if why:
                raise LibvirtFailure(
                    f"{why}: libvirt would have to run its QEMU as root, which kvmlab does "
                    "only when asked",
                    self.uri_of(guest),
                    f"{loaded.lab.name}/{name}",
                    [
                        "--qemu-as-root (or qemu_as_root = true in the lab's [libvirt]): that "
                        "domain's QEMU runs as root, and a guest booting the default image then "
                        "reads the host root through its share as root, without kvmlab's masked "
                        "host view",
                        "or run the lab on the qemu backend (QEMU in a masked view of the host)",
                    ],
                )


def target_uuid(target: Any) -> str:
    from kvmlab.render.identity import domain_uuid

    return domain_uuid(target.lab, target.address)
