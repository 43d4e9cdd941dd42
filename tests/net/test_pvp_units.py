"""The PVP pieces that start nothing: command lines, hops, the samples of a window, and
which of a lab's own workloads a run executes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kvmlab.bench.plan import Plan, plan
from kvmlab.errors import UsageError
from kvmlab.net.pvp import Where, loopback_hops, pvp_hops, samples_of
from kvmlab.net.testpmd_stats import PortRates
from kvmlab.progress import QUIET
from kvmlab.render.dpdk import Port, switch_argv, traffic_argv
from kvmlab.spec import LoadedLab, load_lab, parse_lab
from kvmlab.spec.switch import SwitchSpec

LABS = Path(__file__).resolve().parents[2] / "src" / "kvmlab" / "labs"
PORTS = ["kvmlab-gen", "vm0", "vm1", "kvmlab-sink"]


def test_switch_argv_is_seed_002s_vswitch_without_files_or_nics() -> None:
    spec = SwitchSpec(kind="testpmd", cores=(2, 3), main_core=0)
    argv = switch_argv(
        spec, "kvmlab-lab-switch", [Port("a", Path("/r/a.sock")), Port("b", Path("/r/b.sock"))]
    )
    assert argv[:5] == ["dpdk-testpmd", "-l", "0,2-3", "--main-lcore", "0"]
    assert {
        "--no-huge",
        "--no-shconf",
        "--no-pci",
        "-i",
        "--forward-mode=io",
        "--port-topology=paired",
        "--nb-cores=2",
    } <= set(argv)
    assert argv[argv.index("--vdev") + 1] == "net_vhost0,iface=/r/a.sock,queues=1"
    huge = switch_argv(SwitchSpec(kind="testpmd", hugepages=True), "p", [])
    assert "--in-memory" in huge and "--no-huge" not in huge


def test_generator_frames_exclude_the_crc() -> None:
    argv = traffic_argv("txonly", "g", Path("/r/g.sock"), 0, 1, 64, True)
    assert "--txpkts=60" in argv and "--txonly-multi-flow" in argv
    assert any(a.startswith("net_virtio_user0,path=/r/g.sock") for a in argv)
    sink = traffic_argv("rxonly", "s", Path("/r/s.sock"), 0, 1, 64, False, server=True)
    assert "--forward-mode=rxonly" in sink and not any(a.startswith("--txpkts") for a in sink)
    assert any(a.endswith(",server=1") for a in sink)


def rates(rx: float, tx: float, rx_lost: float = 0, tx_lost: float = 0) -> PortRates:
    return PortRates(rx, tx, rx_lost, tx_lost, rx * 512, tx * 512)


def test_a_window_names_every_hop_and_where_packets_were_lost() -> None:
    got = {
        "generator": {0: rates(0, 2e6, tx_lost=1e5)},
        "switch": {
            0: rates(2e6, 0),
            1: rates(0, 1e6, tx_lost=1e6),
            2: rates(9e5, 0),
            3: rates(0, 9e5),
        },
        "guest": {0: rates(1e6, 0), 1: rates(0, 9e5)},
        "sink": {0: rates(9e5, 0)},
    }
    at = Where("default", "dpdk", "L1", "tcg", "cmd", 2)
    samples = {s.metric: s for s in samples_of(pvp_hops(PORTS, ("vm0", "vm1")), got, 64, 0, at)}
    assert samples["64B sent"].value == 2.0 and samples["64B sent"].unit == "Mpps"
    assert samples["64B switch to guest lost"].value == 1.0  # the guest did not keep up
    assert samples["64B guest out"].value == 0.9
    assert samples["64B received"].value == 0.9
    assert samples["64B loss"].value == pytest.approx(55.0) and samples["64B loss"].unit == "%"
    assert samples["64B received per switch core"].value == 0.45
    assert "64B guest in lost" not in samples  # nothing lost there: no row of zeros
    assert {s.level for s in samples.values()} == {"L1"}


def test_loopback_hops_skip_the_guest() -> None:
    hops = loopback_hops(["kvmlab-gen", "kvmlab-sink"])
    assert [h.name for h in hops] == ["sent", "switch in", "switch out", "received"]
    assert [(h.process, h.port) for h in hops][1:3] == [("switch", 0), ("switch", 1)]


def shipped(name: str) -> LoadedLab:
    return load_lab(LABS / f"{name}.toml")


def test_the_pvp_lab_runs_pvp_only_unless_asked() -> None:
    lab = shipped("vhost-user-testpmd")
    planned = plan(lab, None, {"L0", "L1"})
    assert (planned.only, planned.suite_runs, names(planned)) == (None, False, ["pvp"])
    planned = plan(lab, "cpu,pvp", {"L0", "L1"})
    assert (planned.only, planned.suite_runs, names(planned)) == (["cpu"], True, ["pvp"])
    assert names(plan(lab, "cpu", {"L0", "L1"})) == []


def test_pvp_asked_of_a_lab_without_a_switch_is_refused() -> None:
    plain = LoadedLab(parse_lab(b"name = 't'\n[guests.vm]\n", "t.toml"), Path("t.toml"), "0")
    with pytest.raises(UsageError, match=r"declares no \[switch\]"):
        plan(plain, "pvp", {"L0", "L1"})
    assert names(plan(plain, None, {"L0", "L1"})) == []


def names(planned: Plan) -> list[str]:
    """The lab's own workloads a plan runs."""
    return [w.name for w in planned.lab]


class FakeClock:
    """Host time that passes only when slept."""

    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


class FakeGenerator:
    """testpmd's prompt: ``start``/``stop`` add up how long it has sent."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.typed: list[str] = []
        self.sent = 0.0
        self.since: float | None = None

    def command(self, line: str, timeout: float = 30.0) -> str:
        self.typed.append(line)
        if line == "start" and self.since is None:
            self.since = self.clock.now
        if line == "stop" and self.since is not None:
            self.sent += self.clock.now - self.since
            self.since = None
        return ""


class FakeCounted:
    """A process whose counters grow at fixed rates while the generator sends; ``late``
    packets per trial reach it only after the generator stopped (still in flight)."""

    def __init__(
        self, name: str, gen: FakeGenerator, ports: dict[int, tuple[int, int]], late: int = 0
    ) -> None:
        self.name, self.gen, self.ports, self.late = name, gen, ports, late
        self.reads, self.stops, self.since_stop = 0, 0, 0

    def snapshot(self) -> Any:
        from kvmlab.net.testpmd_stats import PortCounters, Snapshot

        self.reads += 1
        sent = self.gen.sent + (
            self.gen.clock.now - self.gen.since if self.gen.since is not None else 0.0
        )
        stops = self.gen.typed.count("stop")
        if stops != self.stops:
            self.stops, self.since_stop = stops, 0
        self.since_stop += 1
        trials = stops - 1  # the first stop only set the frame size
        arrived = trials if self.since_stop > 1 else trials - 1  # the last trial's come late
        extra = self.late * max(arrived, 0)
        return Snapshot(
            self.gen.clock.now,
            {
                p: PortCounters(
                    rx_packets=int(rx * sent) + extra * bool(rx), tx_packets=int(tx * sent)
                )
                for p, (rx, tx) in self.ports.items()
            },
        )


class FakeToggle:
    def __init__(self) -> None:
        self.calls: list[bool] = []

    def set(self, on: bool) -> None:
        self.calls.append(on)


def fake_loopback(monkeypatch: pytest.MonkeyPatch, late: int = 0) -> tuple[Any, list[Any]]:
    import kvmlab.net.pvp as pvp
    from kvmlab.net.traffic import HostTestPmd

    clock = FakeClock()
    monkeypatch.setattr(pvp, "time", clock)
    process = FakeGenerator(clock)
    gen = HostTestPmd("generator", process)  # type: ignore[arg-type]
    counted = [
        FakeCounted("generator", process, {0: (0, 1000)}),
        FakeCounted("switch", process, {0: (1000, 0), 1: (0, 900)}),
        FakeCounted("sink", process, {0: (900, 0)}, late),
    ]
    return gen, counted


LOOPBACK_AT = Where("default", "host", "L0", "native", "cmd", 1)


def loopback_trials(
    gen: Any, counted: list[Any], warmup: float, seconds: float, reps: int, tuning: Any = None
) -> list[Any]:
    """``pvp.measure`` of the fake loopback (64-byte frames, generator to sink)."""
    import kvmlab.net.pvp as pvp

    return pvp.measure(
        gen,
        counted,
        loopback_hops(["kvmlab-gen", "kvmlab-sink"]),
        [64],
        warmup,
        seconds,
        reps,
        LOOPBACK_AT,
        QUIET,
        tuning,
    )


def test_tuned_and_untuned_windows_alternate_and_tuning_ends_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:

    gen, counted = fake_loopback(monkeypatch)
    toggle = FakeToggle()
    got = loopback_trials(gen, counted, warmup=0, seconds=1, reps=2, tuning=toggle)
    assert toggle.calls == [False, True, True, False, False]  # swapped order, then off
    assert {s.variant for s in got} == {"untuned", "tuned"}
    received = [s for s in got if s.metric == "64B received"]
    assert [s.value for s in received] == pytest.approx([0.0009] * 4)  # 900/s over 1 s
    typed = gen.process.typed
    assert typed[:4] == ["stop", "set txpkts 60", "start", "stop"]
    assert typed.count("start") == 4 and typed[-1] == "stop"  # four trials, each stopped


def test_a_trial_counts_every_hop_over_the_sending_time_after_the_path_drained(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Packets still in flight when the generator stops are counted (the sink is read
    until it stays still), and over the generator's sending time, not the reading time."""

    gen, counted = fake_loopback(monkeypatch, late=50)
    got = loopback_trials(gen, counted, warmup=0.5, seconds=2, reps=1)
    value = {s.metric: s.value for s in got}
    assert value["64B sent"] == pytest.approx(0.001)
    assert value["64B received"] == pytest.approx((900 * 2 + 50) / 2 / 1e6)
    assert counted[2].reads > 4  # read until still, not once


def test_guest_ports_are_found_by_mac_not_by_position() -> None:
    from kvmlab.net.guest_dpdk import port_macs
    from kvmlab.net.testpmd_stats import parse_port_stats

    data = Path(__file__).parent / "data"
    text = (data / "guest-port-info-all.txt").read_text()  # the PVP guest's, recorded
    assert port_macs(text) == {"52:54:00:19:ab:6b": 0, "52:54:00:b2:cd:8e": 1}
    assert sorted(parse_port_stats((data / "guest-port-stats.txt").read_text(), 0).ports) == [0, 1]
    hops = pvp_hops(PORTS, ("vm0", "vm1"), (1, 0))
    assert [(h.name, h.port) for h in hops if h.process == "guest"] == [
        ("guest in", 1),
        ("guest out", 0),
    ]


def test_the_generators_drops_count_although_start_resets_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import kvmlab.net.pvp as pvp
    from kvmlab.net.traffic import HostTestPmd

    clock = FakeClock()
    monkeypatch.setattr(pvp, "time", clock)
    process = FakeGenerator(clock)
    trial = {"sent": 0.0}

    class Gen(FakeCounted):
        def snapshot(self) -> Any:
            snap = super().snapshot()
            if process.since is not None:  # sending: drops of this trial so far
                trial["sent"] = clock.now - process.since
            snap.ports[0].tx_dropped = int(500 * trial["sent"])
            return snap

    counted = [
        Gen("generator", process, {0: (0, 1000)}),
        FakeCounted("switch", process, {0: (1000, 0), 1: (0, 900)}),
        FakeCounted("sink", process, {0: (900, 0)}),
    ]
    original = process.command

    def command(line: str, timeout: float = 30.0) -> str:
        if line == "start":
            trial["sent"] = 0.0  # what testpmd's start does to its forwarding stats
        if line == "stop" and process.since is not None:
            trial["sent"] = clock.now - process.since
        return original(line, timeout)

    process.command = command  # type: ignore[method-assign]
    gen = HostTestPmd("generator", process)  # type: ignore[arg-type]
    got = loopback_trials(gen, counted, warmup=0, seconds=2, reps=3)
    lost = [s.value for s in got if s.metric == "64B sent lost"]
    # 500/s in every trial, not only the first (the fake clock's sums round a packet)
    assert lost == pytest.approx([0.0005] * 3, rel=0.01)


def test_a_sink_that_never_drains_fails_the_trial(monkeypatch: pytest.MonkeyPatch) -> None:
    from kvmlab.errors import RuntimeFailure

    gen, counted = fake_loopback(monkeypatch)

    class Busy(FakeCounted):
        def snapshot(self) -> Any:
            snap = super().snapshot()
            snap.ports[0].rx_packets += self.reads  # something keeps arriving
            return snap

    counted[2] = Busy("sink", counted[2].gen, {0: (900, 0)})
    with pytest.raises(RuntimeFailure, match="packets still moved"):
        loopback_trials(gen, counted, warmup=0, seconds=1, reps=1)


def test_what_a_ring_held_before_the_trial_is_not_counted_in_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """256 packets (a guest's ring) left from before the trial reach the sink only once
    the path is read: the trial starts after they have, so no hop counts more than the
    one before it was given (the fault a fresh-machine run hit: guest in > switch to guest)."""

    gen, counted = fake_loopback(monkeypatch)

    class Leftover(FakeCounted):
        def snapshot(self) -> Any:
            snap = super().snapshot()
            if self.reads > 1:  # its testpmd polls from its second read on
                snap.ports[0].rx_packets += 256
            return snap

    counted[2] = Leftover("sink", counted[2].gen, {0: (900, 0)})
    got = loopback_trials(gen, counted, warmup=0, seconds=1, reps=1)
    value = {s.metric: s.value for s in got}
    assert value["64B received"] == pytest.approx(0.0009)  # not 0.0009 + 256 a second
