"""A private OVS-DPDK (the networking course lab's switch): its own ovsdb-server and
``ovs-vswitchd-dpdk`` with their database, sockets and logs in the switch's directory,
never the host's OVS.

One bridge (``datapath_type=netdev``) with a ``dpdkvhostuserclient`` port per switch port
(OVS connects; QEMU or the traffic generator is the socket server), OpenFlow port numbers
in port order (1, 2, ...) and flows pairing neighbours as testpmd's paired topology does:
1 <-> 2, 3 <-> 4, ...
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from kvmlab.errors import ProcessFailure, RuntimeFailure
from kvmlab.fabric import namespaces
from kvmlab.proc.processes import alive, start_time, tail, terminate
from kvmlab.proc.signals import deferred_signals, unblock_in_child
from kvmlab.spec.switch import SwitchSpec
from kvmlab.spec.units import MIB

VSWITCHD = "/usr/lib/openvswitch-switch-dpdk/ovs-vswitchd-dpdk"
SCHEMA = "/usr/share/openvswitch/vswitch.ovsschema"
BRIDGE = "kvbr0"
TOOLS = ("ovsdb-tool", "ovsdb-server", "ovs-vsctl", "ovs-ofctl", "ovs-appctl")


def require() -> None:
    """:class:`RuntimeFailure` naming what is missing when OVS-DPDK is not installed."""
    missing = [t for t in TOOLS if shutil.which(t) is None]
    if missing or not Path(VSWITCHD).exists():
        raise RuntimeFailure(
            f"OVS-DPDK is not installed ({', '.join(missing) or VSWITCHD} "
            "missing): apt-get install openvswitch-switch-dpdk "
            "(make deps does)"
        )


def version() -> tuple[int, int]:
    """The (major, minor) version of ``ovs-vswitchd-dpdk`` (``(0, 0)`` when it does not say)."""
    require()
    out = subprocess.run(
        [VSWITCHD, "--version"], capture_output=True, text=True, timeout=30, check=False
    ).stdout
    found = re.search(r"\(Open vSwitch\) (\d+)\.(\d+)", out)
    return (int(found[1]), int(found[2])) if found else (0, 0)


def sleep_key(spec: SwitchSpec, ovs: tuple[int, int]) -> str | None:
    """The ``other_config`` key of load-based PMD sleeping in this OVS (``None`` when the
    lab does not ask for it); :class:`RuntimeFailure` for an OVS without it."""
    if not spec.idle_sleep_max_us:
        return None
    if ovs < (3, 1):
        raise RuntimeFailure(
            f"switch.idle_sleep_max_us needs OVS 3.1 or newer (load-based PMD sleeping); "
            f"this OVS is {ovs[0]}.{ovs[1]}: remove it from the lab, or install a newer OVS"
        )
    return "pmd-maxsleep" if ovs < (3, 2) else "pmd-sleep-max"  # renamed in OVS 3.2


def mask(cpus: Sequence[int]) -> str:
    """``0x6`` for CPUs 1 and 2."""
    return hex(sum(1 << c for c in cpus))


def config_commands(
    spec: SwitchSpec,
    ports: Sequence[tuple[str, Path]],
    prefix: str = "kvmlab-ovs",
    ovs: tuple[int, int] = (3, 1),
) -> list[list[str]]:
    """The ``ovs-vsctl`` arguments that set DPDK up and build the bridge (pure, for OVS
    version ``ovs``). OVS adds ``--in-memory`` itself: its huge pages are unlinked at once,
    nothing left on disk."""
    extra = f"--no-pci --single-file-segments --file-prefix={prefix}"
    sleep = sleep_key(spec, ovs)
    cmds = [
        [
            "set",
            "Open_vSwitch",
            ".",
            "other_config:dpdk-init=true",
            f"other_config:dpdk-socket-mem={spec.memory // MIB}",
            f"other_config:dpdk-socket-limit={spec.memory // MIB}",
            f"other_config:dpdk-lcore-mask={mask([spec.main_core])}",
            f"other_config:pmd-cpu-mask={mask(spec.cores)}",
            f"other_config:dpdk-extra={extra}",
            *([f"other_config:{sleep}={spec.idle_sleep_max_us}"] if sleep else []),
        ],
        ["add-br", BRIDGE, "--", "set", "bridge", BRIDGE, "datapath_type=netdev"],
    ]
    for i, (name, socket) in enumerate(ports):
        cmds.append(
            [
                "add-port",
                BRIDGE,
                name,
                "--",
                "set",
                "Interface",
                name,
                "type=dpdkvhostuserclient",
                f"options:vhost-server-path={socket}",
                f"options:n_rxq={spec.queues}",
                f"ofport_request={i + 1}",
            ]
        )
    return cmds


def flows(count: int) -> list[str]:
    """OpenFlow rules pairing ports 1 <-> 2, 3 <-> 4, ... (an odd last port goes nowhere)."""
    out = []
    for a in range(1, count, 2):
        out += [f"in_port={a},actions=output:{a + 1}", f"in_port={a + 1},actions=output:{a}"]
    return out


class Ovs:
    """ovsdb-server and ovs-vswitchd-dpdk of one switch directory."""

    def __init__(
        self,
        directory: Path,
        pids: Sequence[tuple[str, int, int | None]] = (),
        on_spawn: Callable[[], None] | None = None,
        netns: str | None = None,
    ) -> None:
        self.dir = directory
        self.netns = netns
        """The namespace ovs-vswitchd runs in: its datapath's tap devices (``ovs-netdev``,
        the bridge's own port), which OVS makes persistent, live and die there."""
        self.on_spawn = on_spawn
        """Called (signals held) as soon as a daemon's pid is known: the caller records it."""
        self.pids: list[tuple[str, int, int | None]] = list(pids)
        """(program, pid, start time) of ovsdb-server and ovs-vswitchd, as they started."""

    @property
    def env(self) -> dict[str, str]:
        """Every OVS tool looks in the switch's directory, never /var/run/openvswitch."""
        d = str(self.dir)
        return {**os.environ, "OVS_RUNDIR": d, "OVS_DBDIR": d, "OVS_LOGDIR": d, "OVS_SYSCONFDIR": d}

    @property
    def db(self) -> str:
        """The database's socket."""
        return f"unix:{self.dir / 'db.sock'}"

    def run(self, argv: list[str], what: str, timeout: float = 30.0, unblock: bool = False) -> str:
        """An OVS tool in this switch's environment; :class:`ProcessFailure` when it fails.
        ``unblock``: it starts a daemon inside :func:`deferred_signals`, which must not
        inherit the held signals blocked."""
        try:
            done = subprocess.run(
                argv,
                env=self.env,
                capture_output=True,
                text=True,
                timeout=timeout,
                preexec_fn=unblock_in_child if unblock else None,
            )
        except subprocess.TimeoutExpired:
            raise ProcessFailure(
                f"{what}: no answer in {timeout:.0f} s",
                argv,
                None,
                tail(self.dir / "ovs-vswitchd.log", 10),
            ) from None
        if done.returncode != 0:
            raise ProcessFailure(
                f"{what} failed",
                argv,
                done.returncode,
                (done.stderr or done.stdout).splitlines()[-10:],
            )
        return done.stdout

    def vsctl(self, *args: str, wait: bool = True) -> str:
        """``ovs-vsctl`` against this switch's database."""
        flags = [] if wait else ["--no-wait"]
        return self.run(
            ["ovs-vsctl", f"--db={self.db}", "--timeout=60", *flags, *args],
            f"ovs-vsctl {args[0]}",
            90,
        )

    def _daemon(self, argv: list[str], pidfile: Path, what: str) -> None:
        with deferred_signals():  # on record (self.pids) as soon as it reports its pid
            try:
                self.run(argv, f"starting {what}", 120, unblock=True)
            finally:
                with contextlib.suppress(OSError, ValueError, IndexError):
                    pid = int(pidfile.read_text().split()[0])
                    self.pids.append((what, pid, start_time(pid)))
                    if self.on_spawn is not None:
                        self.on_spawn()

    def start(
        self, spec: SwitchSpec, ports: Sequence[tuple[str, Path]], prefix: str = "kvmlab-ovs"
    ) -> None:
        """Database, daemon, bridge, ports and flows; OVS then connects to each port's socket
        whenever its server (QEMU, the generator) is there."""
        require()
        db = self.dir / "conf.db"
        self.run(["ovsdb-tool", "create", str(db), SCHEMA], "creating the OVS database")
        self._daemon(
            [
                "ovsdb-server",
                str(db),
                f"--remote=p{self.db}",
                f"--pidfile={self.dir / 'ovsdb-server.pid'}",
                f"--log-file={self.dir / 'ovsdb-server.log'}",
                "--detach",
                "--no-chdir",
            ],
            self.dir / "ovsdb-server.pid",
            "ovsdb-server",
        )
        self.vsctl("init", wait=False)
        commands = config_commands(spec, ports, prefix, version())
        self.vsctl(*commands[0], wait=False)
        pidfile = self.dir / "ovs-vswitchd.pid"
        argv = [
            VSWITCHD,
            self.db,
            f"--pidfile={pidfile}",
            f"--log-file={self.dir / 'ovs-vswitchd.log'}",
            "--detach",
            "--no-chdir",
        ]
        if self.netns is not None:
            argv = namespaces.exec_argv(self.netns, argv)
        self._daemon(argv, pidfile, "ovs-vswitchd-dpdk")
        for cmd in commands[1:]:
            self.vsctl(*cmd)
        self.run(["ovs-ofctl", "del-flows", BRIDGE], "clearing the flows")
        for flow in flows(len(ports)):
            self.run(["ovs-ofctl", "add-flow", BRIDGE, flow], f"adding flow {flow}")
        if spec.idle_sleep_max_us:
            self._check_sleep(spec.idle_sleep_max_us)

    def _check_sleep(self, us: int) -> None:
        """That ovs-vswitchd took the sleep the lab asks for: it logs it when it applies
        the datapath's configuration (OVS 3.1: ``PMD max sleep request is 500 usecs.``)."""
        log = self.dir / "ovs-vswitchd.log"
        said = [line for line in tail(log, 200) if "sleep" in line.lower()]
        if not any(re.search(rf"\b{us} ?us", line) for line in said):
            raise RuntimeFailure(
                f"ovs-vswitchd did not take idle_sleep_max_us = {us} (its log {log} says "
                f"{said[-1].strip() if said else 'nothing of sleeping'})"
            )

    def control(self, program: str = "ovs-vswitchd-dpdk") -> Path:
        """A daemon's control socket (``ovs-vswitchd-dpdk.PID.ctl``)."""
        pid = next((p for name, p, _ in self.pids if name == program), 0)
        return self.dir / f"{program}.{pid}.ctl"

    def appctl(self, *args: str) -> str:
        """``ovs-appctl`` to the switch's ovs-vswitchd."""
        return self.run(["ovs-appctl", "-t", str(self.control()), *args], f"ovs-appctl {args[0]}")

    def dump_ports(self) -> str:
        """``ovs-ofctl dump-ports``: every port's counters, read live from the datapath."""
        return self.run(["ovs-ofctl", "dump-ports", BRIDGE], "ovs-ofctl dump-ports")

    def stop(self) -> None:
        """ovs-vswitchd first (it closes its ports), then the database; SIGTERM/SIGKILL
        for one that does not exit."""
        for name, pid, started in reversed(self.pids):
            if not alive(pid, started=started):
                continue
            with contextlib.suppress(ProcessFailure):
                self.run(["ovs-appctl", "-t", str(self.control(name)), "exit"], "exit", 20)
            deadline = time.monotonic() + 10
            while alive(pid, started=started) and time.monotonic() < deadline:
                time.sleep(0.05)
            if alive(pid, started=started):
                terminate(pid, started=started, grace=3.0)
        left = [f"{name} {p}" for name, p, s in self.pids if alive(p, started=s)]
        if left:
            raise RuntimeFailure(f"OVS processes did not stop: {', '.join(left)}")
