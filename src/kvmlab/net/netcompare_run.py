"""`netcompare` in a benchmark run: the lab up (switch, networks, guests), then on every
path iperf3 TCP per stream count in both directions, UDP at small frames and ping, each
repeated; servers bound to the lab's private addresses or loopback and stopped after."""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

from kvmlab.bench import tools
from kvmlab.bench.parsers.iperf3 import parse_iperf3, parse_iperf3_udp
from kvmlab.bench.parsers.metric import Metric
from kvmlab.bench.parsers.ping import parse_ping, parse_ping_replies
from kvmlab.errors import KvmlabError, RuntimeFailure, StateError
from kvmlab.fabric import namespaces
from kvmlab.fabric.lab_networks import VHOST_NET
from kvmlab.net.multiqueue import QueueWatch
from kvmlab.net.netcompare import (
    SERVER_PORT,
    UDP_OVERHEAD,
    WORKLOAD,
    NetPath,
    iperf_argv,
    ping_argv,
    plan_paths,
    unpaired,
    without_vhost_net,
)
from kvmlab.proc.processes import die_with_parent, terminate
from kvmlab.progress import Progress
from kvmlab.results.model import Sample
from kvmlab.runtime import lab as labrun
from kvmlab.runtime.machine import Machine
from kvmlab.spec import LoadedLab

At = Callable[[str, str, str], None]


def _free_loopback_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def server(path: NetPath, machines: dict[str, Machine], lab: str) -> Iterator[int]:
    """iperf3 ``-s`` at ``path.b``, bound to its address only; yields its port."""
    b = path.b
    if b.kind == "guest":
        vm = machines[b.name]
        pid = vm.exec_background(tools.iperf3_server(b.addr, SERVER_PORT))
        try:
            yield SERVER_PORT
        finally:
            with contextlib.suppress(KvmlabError):
                vm.exec(["kill", str(pid)], timeout=60)
        return
    port = SERVER_PORT if b.kind == "netns" else _free_loopback_port()
    argv = tools.iperf3_server(b.addr, port)
    if b.kind == "netns":
        argv = namespaces.exec_argv(namespaces.ns_name(lab, "net"), argv)
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        preexec_fn=die_with_parent,
    )
    try:
        time.sleep(0.3)
        if proc.poll() is not None:
            err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
            raise RuntimeFailure(f"iperf3 server on {b.addr}:{port} exited: {err.strip()}")
        yield port
    finally:
        terminate(proc.pid, grace=3.0)
        proc.wait()


def _guest_run(vm: Machine, argv: list[str], timeout: float, what: str) -> str:
    """Run a client in the guest; its stdout (iperf3 reports errors in its JSON)."""
    done = vm.exec(argv, timeout=timeout * vm.level_factor() + 60)
    out = done.stdout.decode(errors="replace")
    if done.returncode != 0 and not out.strip():
        raise RuntimeFailure(
            f"{vm.config.name}: {what} failed (exit {done.returncode}): "
            f"{done.stderr.decode(errors='replace').strip()[-300:]}"
        )
    return out


def _retrying(vm: Machine, argv: list[str], timeout: float, what: str) -> str:
    """A client that may start before its server listens: refused connections are retried."""
    for attempt in range(10):
        out = _guest_run(vm, argv, timeout, what)
        if "Connection refused" not in out or attempt == 9:
            return out
        time.sleep(0.5)
    raise AssertionError("unreachable")


def _tcp(
    vm: Machine, path: NetPath, port: int, seconds: float, streams: int, reverse: bool
) -> tuple[float, list[str]]:
    """Received Gbit/s of one iperf3 TCP run, and its argv."""
    argv = iperf_argv(path, port, seconds, streams, reverse)
    got = _values(parse_iperf3(_retrying(vm, argv, seconds, "iperf3")))
    return got["received_gbit_s"], argv


def _values(metrics: list[Metric]) -> dict[str, float]:
    return {m.name: m.value for m in metrics}


def measure_path(
    path: NetPath,
    machines: dict[str, Machine],
    lab: LoadedLab,
    variant: str,
    reps: int,
    progress: Progress,
    documents: dict[str, Any] | None = None,
) -> list[Sample]:
    """Every measurement of one path, ``reps`` times, as samples of the client guest; on a
    multiqueue path, the channel counts compared and the spread of the most streams."""
    spec = lab.lab.bench.netcompare
    vm = machines[path.a.name]
    out: list[Sample] = []
    payload = spec.udp_frame - UDP_OVERHEAD
    most = max(spec.streams)

    def add(metric: str, value: float, unit: str, better: bool, rep: int, argv: list[str]) -> None:
        out.append(
            Sample(
                variant,
                path.a.name,
                "L1",
                vm.config.accel,
                WORKLOAD,
                path.metric(metric),
                value,
                unit,
                better,
                rep,
                " ".join(argv),
            )
        )

    watches = _watches(path, machines)
    with server(path, machines, lab.lab.name) as port:
        for rep in range(reps):
            for streams in spec.streams:
                for reverse in (False, True):
                    way = "<-" if reverse else "->"
                    progress.step(f"netcompare: {path.name} tcp P{streams} {way} (rep {rep + 1})")
                    watched = watches and streams == most and rep == 0
                    if watched:
                        watches[0].before()
                    rate, argv = _tcp(vm, path, port, spec.seconds, streams, reverse)
                    if watched:
                        watches[0].after(f"tcp P{streams} {way}")
                    add(f"tcp P{streams} {way}", rate, "Gbit/s", True, rep, argv)
            for reverse in (False, True):
                way = "<-" if reverse else "->"
                argv = iperf_argv(path, port, spec.seconds, 1, reverse, payload)
                progress.step(
                    f"netcompare: {path.name} udp {spec.udp_frame}B {way} (rep {rep + 1})"
                )
                udp = _values(parse_iperf3_udp(_retrying(vm, argv, spec.seconds, "iperf3 -u")))
                add(f"udp {spec.udp_frame}B {way}", udp["received_mpps"], "Mpps", True, rep, argv)
                add(f"udp {spec.udp_frame}B {way} loss", udp["lost_pct"], "%", False, rep, argv)
            argv = ping_argv(path, spec.pings)
            progress.step(f"netcompare: {path.name} ping x{spec.pings} (rep {rep + 1})")
            text = _guest_run(vm, argv, spec.pings * 0.05 + 10, "ping")
            summary = _values(parse_ping(text))
            add("ping loss", summary["packet_loss_pct"], "%", False, rep, argv)
            add("ping avg", summary["rtt_avg_ms"], "ms", False, rep, argv)
            if "rtt_mdev_ms" in summary:
                add("ping mdev", summary["rtt_mdev_ms"], "ms", False, rep, argv)
            add("ping p99", _values(parse_ping_replies(text))["rtt_p99_ms"], "ms", False, rep, argv)
        counts = [c for c in spec.queues if c <= path.queues] if watches else []
        for count in counts:
            for w in watches:
                w.set_channels(count)
            for rep in range(reps):
                for reverse in (False, True):
                    way = "<-" if reverse else "->"
                    test = f"{count}q tcp P{most} {way}"
                    progress.step(f"netcompare: {path.name} {test} (rep {rep + 1})")
                    if rep == 0:
                        watches[0].before()
                    rate, argv = _tcp(vm, path, port, spec.seconds, most, reverse)
                    if rep == 0:
                        watches[0].after(test, path.queues)
                    add(test, rate, "Gbit/s", True, rep, argv)
        for w in watches if counts else ():
            w.set_channels(path.queues)
    if watches:
        watches[0].snapshot()  # the channels as left, for the findings
        if documents is not None:
            documents[path.name] = watches[0].document()
        out.extend(watches[0].samples(variant, WORKLOAD, path.metric(""), vm.config.accel))
        for line in watches[0].report(f"{path.name}: "):
            progress.step(f"netcompare: {line}")
    return out


def _watches(path: NetPath, machines: dict[str, Machine]) -> list[QueueWatch]:
    """The multiqueue NICs of the path's guests, the client's first (none: one queue)."""
    if path.queues <= 1:
        return []
    ends = [e for e in (path.a, path.b) if e.kind == "guest" and e.mac is not None]
    return [QueueWatch(machines[e.name], e.mac or "", path.queues) for e in ends]


def run_netcompare(
    loaded: LoadedLab,
    variant: str,
    reps: int,
    launch: labrun.Launch,
    at: At,
    store: Callable[[list[Sample]], None],
    keep: Callable[[dict[str, Any]], None],
) -> None:
    """Bring the lab up (its guests run by ``launch.backend``) and measure every path;
    ``store`` gets each path's samples, ``keep`` the document of the multiqueue checks
    (paths, left-out NICs, findings, spreads)."""
    progress = launch.progress
    dropped: list[str] = []
    if not VHOST_NET.exists():
        lab, dropped = without_vhost_net(loaded.lab)
        if dropped:
            progress.step(
                f"netcompare: tap+vhost-net not measured: this host has no {VHOST_NET} "
                f"(modprobe vhost_net; in a guest hypervisor it loads), so "
                f"{', '.join(dropped)} left out"
            )
            loaded = replace(loaded, lab=lab)
    lab = loaded.lab
    paths = plan_paths(lab, lab.switch.kind if lab.switch else None)
    if shutil.which("iperf3") is None or shutil.which("ping") is None:
        raise RuntimeFailure(
            "netcompare needs iperf3 and ping on the host (and in the "
            "guests, which see the host's): apt-get install iperf3 "
            "iputils-ping (make deps does)"
        )
    loose = unpaired(lab)
    for why in loose:
        progress.step(f"netcompare: not measured: {why}")
    if not paths:
        raise StateError(
            f"{loaded.path}: no network path to compare (give guests a user NIC, "
            "a NIC on a [networks] network, or addressed switch ports)"
        )
    reps = lab.bench.netcompare.repetitions or reps
    guests = ", ".join(dict.fromkeys(p.a.name for p in paths))
    at("L1", guests, WORKLOAD)
    progress.step(f"netcompare: {len(paths)} path(s): {', '.join(p.name for p in paths)}")
    doc: dict[str, Any] = {
        "paths": [p.name for p in paths],
        "multiqueue": {},
        "left_out": [f"{k}: no {VHOST_NET} on this host" for k in dropped] + loose,
    }
    with labrun.started(loaded, launch, start_inner=False) as machines:
        by_name = {m.config.address[0]: m for m in machines}
        try:
            for path in paths:
                store(
                    measure_path(path, by_name, loaded, variant, reps, progress, doc["multiqueue"])
                )
        finally:
            keep(doc)
