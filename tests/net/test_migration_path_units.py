"""The packet-path probe's pure parts: the guest's switch NICs read from a rendered command
line (the golden files), the generator's neighbour, where each lost probe is placed, the
report's lines; and sockets made in another process's network namespace."""

from __future__ import annotations

import contextlib
import shlex
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

from kvmlab.fabric.switch import GEN_PORT, SINK_PORT
from kvmlab.migrate.pathprobe import HopCount, hop_losses
from kvmlab.migrate.result import Outcome, packet_path_lines
from kvmlab.net.migration_path import paired_port
from kvmlab.proc.netns import socket_in
from kvmlab.runtime.qemu.handover import shared_server_sockets
from kvmlab.runtime.records import argv_nics
from tests.conftest import ROOT

GOLDEN = ROOT / "tests" / "golden"


def golden_argv(name: str) -> list[str]:
    text = (GOLDEN / name).read_text()
    lines = [line for line in text.splitlines() if not line.startswith("#")]
    return shlex.split(" ".join(line.rstrip("\\") for line in lines))


def test_the_switch_nics_are_read_from_the_rendered_command_line() -> None:
    nics = argv_nics(golden_argv("vhost-migrate-vm.tcg.qemu.sh"))
    macs = {n.where: n.mac for n in nics if n.kind == "vhost-user"}
    assert macs == {
        "/run/kvmlab/vhost-migrate/.switch/vm0.sock": "52:54:00:2f:dd:ab",
        "/run/kvmlab/vhost-migrate/.switch/vm1.sock": "52:54:00:f6:54:ae",
    }
    assert argv_nics(golden_argv("migrate-vm.tcg.qemu.sh")) == []  # user NIC only


def test_the_generator_s_neighbour_is_the_probed_port() -> None:
    assert paired_port([GEN_PORT, "vm0", SINK_PORT, "vm1"]) == "vm0"
    assert paired_port(["a", "b", GEN_PORT, SINK_PORT]) == SINK_PORT  # no guest port there
    assert paired_port(["a", "b", "c", GEN_PORT]) == "c"
    assert paired_port(["a", "b", GEN_PORT]) is None  # an odd last port has no neighbour
    assert paired_port(["a", "b"]) is None


def test_a_loss_is_placed_between_two_hops_and_frames_that_are_not_probes_are_told_apart() -> None:
    hops = [
        HopCount("sent", 1000),
        HopCount("switch to guest", 800),  # 200 lost at the switch-over
        HopCount("guest out", 810),  # 10 announcements joined
        HopCount("bridge to host", 810),
        HopCount("echoed", 795),  # the 10 end at the host's socket; 5 probes lost there
    ]
    placed = [(h.name, lost, others) for h, lost, others in hop_losses(hops)]
    assert placed == [
        ("sent", 0, 0),
        ("switch to guest", 200, 0),
        ("guest out", 0, 10),
        ("bridge to host", 0, 0),
        ("echoed", 5, -10),
    ]
    assert sum(lost for _, lost, _ in placed) == 205


def test_the_report_gives_the_gap_the_loss_and_each_hop() -> None:
    outcome = Outcome("lab/vm", "precopy")
    outcome.packet_path = "host -> switch port vm0 -> guest and back"
    assert packet_path_lines(outcome) == [
        "packet path: host -> switch port vm0 -> guest and back: gap and loss not measured "
        "(the migration did not complete)"
    ]
    outcome.interrupted = True  # a Ctrl-C after the switch-over, before the measurement
    assert packet_path_lines(outcome)[0].endswith("(interrupted before it was measured)")
    outcome.interrupted = False
    refused = Outcome("lab/vm", "precopy", packet_path="not probed: lab l's switch is not running")
    assert packet_path_lines(refused) == ["packet path: not probed: lab l's switch is not running"]
    outcome.packet_downtime_ms, outcome.packet_baseline_gap_ms = 412.0, 9.0
    outcome.packet_probes = (3300, 210)
    outcome.packet_hops = [("sent", 4300), ("switch to guest", 4090), ("echoed", 4090)]
    lines = packet_path_lines(outcome)
    assert lines[0].endswith(
        "412 ms, 210 of 3300 probes lost (210 ms of probes); its noise before the migration: 9 ms"
    )
    assert "switch to guest" in lines[3] and "210 probes lost here (210 ms at 1 kHz)" in lines[3]
    assert Outcome("lab/vm", "precopy").to_json()["packet_path"]["hops"] == []
    # a part of the probe's own failed: no gap nor loss, but the hops that place it
    outcome.packet_downtime_ms = outcome.packet_probes = None
    outcome.packet_not_measured = "the probe's own part failed: the peer's relay stopped"
    lines = packet_path_lines(outcome)
    assert lines[0].endswith("not measured (the probe's own part failed: the peer's relay stopped)")
    assert "switch to guest" in lines[3], lines


def test_a_server_socket_outside_the_guest_s_directory_is_found() -> None:
    guest = Path("/run/kvmlab/ovs-dpdk-pvp/dpdk")
    argv = golden_argv("ovs-dpdk-pvp-dpdk.tcg.qemu.sh")
    assert shared_server_sockets(argv, guest) == [
        "/run/kvmlab/ovs-dpdk-pvp/.switch/vm0.sock",
        "/run/kvmlab/ovs-dpdk-pvp/.switch/vm1.sock",
    ]
    testpmd = golden_argv("vhost-migrate-vm.tcg.qemu.sh")  # QEMU is the switch's client
    assert shared_server_sockets(testpmd, Path("/run/kvmlab/vhost-migrate/vm")) == []


@pytest.mark.skipif(not Path("/proc/self/ns/net").exists(), reason="no network namespaces")
def test_a_socket_is_made_in_another_process_s_namespace() -> None:
    holder = subprocess.Popen(["unshare", "--net", "--", "sleep", "30"])
    try:
        deadline = time.monotonic() + 10
        while (
            Path(f"/proc/{holder.pid}/ns/net").resolve() == Path("/proc/self/ns/net").resolve()
            and time.monotonic() < deadline
        ):  # unshare has not run yet
            time.sleep(0.01)
        with socket_in(holder.pid) as inside, socket.socket() as here:
            here.bind(("127.0.0.1", 0))
            port = here.getsockname()[1]
            # the same address and port are free there: another network stack
            inside.bind(("127.0.0.1", port))
    finally:
        holder.kill()
        holder.wait()
    with pytest.raises(OSError):
        socket_in(holder.pid)  # gone: its namespace cannot be entered


def test_a_lab_network_tap_has_two_names_and_the_probe_finds_it() -> None:
    from kvmlab.fabric.lab_networks import alternate

    assert alternate("kvtcb2e7877f0") == "kvucb2e7877f0"
    assert alternate("kvucb2e7877f0") == "kvtcb2e7877f0"
    assert alternate("tap0") is None  # the lab's own tap: not kvmlab's to rename
    argv = golden_argv("vhost-migrate-lan.tcg.qemu.sh")
    [nic] = argv_nics(argv)
    kind, tap, mac = nic.kind, nic.where, nic.mac
    assert kind == "tap" and alternate(tap) is not None and mac.startswith("52:54:00:")


def test_an_ovs_port_has_two_socket_names_and_each_destination_takes_the_other() -> None:
    from kvmlab.runtime.qemu.ovs_ports import _other, _port_of

    root = Path("/run/kvmlab/l/.switch")
    assert _port_of(str(root / "vm0.sock"), root) == "vm0"
    assert _port_of(str(root / "vm0.b.sock"), root) == "vm0"
    assert _port_of("/elsewhere/vm0.sock", root) is None  # not the switch's: not a port
    assert _other(str(root / "vm0.sock"), "vm0", root) == str(root / "vm0.b.sock")
    assert _other(str(root / "vm0.b.sock"), "vm0", root) == str(root / "vm0.sock")


def _udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _exchange(port: int, count: int, wait: float = 2.0) -> int:
    """``count`` datagrams to 127.0.0.1:``port``, one at a time (each waits for its echo
    at most ``wait`` s); how many came back."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.settimeout(wait)
        s.connect(("127.0.0.1", port))
        back = 0
        for i in range(count):
            s.send(b"probe %d" % i)
            with contextlib.suppress(TimeoutError):
                back += s.recv(64) == b"probe %d" % i
        return back


GUEST_TOOLS = ("tr", "cat", "rm", "sleep", "grep", "cut", "mkdir", "chmod", "mv")
"""What the peer's scripts call besides the shell, where a guest (the self-contained
image's busybox) has no pgrep."""


@pytest.mark.parametrize("pgrep", [True, False], ids=["pgrep", "no-pgrep"])
def test_the_peer_s_relay_counts_both_ways_and_a_dead_echo_shows_where(
    tmp_path: Path, pgrep: bool
) -> None:
    """The relay a peer guest runs (kvmlab-echo, compiled as for an image) between a prober
    and an echo, on this host's loopback; the guest-side scripts that prepare, stop and
    read it, run by sh here, with pgrep and (as in a busybox guest) without. The echo
    killed from outside (another process) leaves the probes counted out of the relay and
    not back."""
    import os
    import shutil

    from kvmlab.guest.standalone import compile_dirty
    from kvmlab.net.migration_path import PREPARE_RELAY, START_RELAY, STOP_RELAY

    env = dict(os.environ)
    if not pgrep:
        tools = tmp_path / "tools"
        tools.mkdir()
        for tool in GUEST_TOOLS:
            found = shutil.which(tool)
            assert found is not None, tool
            (tools / tool).symlink_to(found)
        env["PATH"] = str(tools)

    program = tmp_path / "bin" / "kvmlab-echo"
    program.parent.mkdir()
    program.write_bytes(compile_dirty(tmp_path))
    program.chmod(0o755)
    relay_dir = tmp_path / "relay"
    (relay_dir / "oldversion").mkdir(parents=True)
    (relay_dir / "counts").write_text("a killed run's\n")

    def run_sh(script: str, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["/bin/sh", "-c", script, "sh", *args],
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
        )

    def sh(script: str, *args: str) -> str:
        done = run_sh(script, *args)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    # the image has no program: it is to be copied, and another version's goes
    missing = str(tmp_path / "none" / "kvmlab-echo")
    assert sh(PREPARE_RELAY, str(relay_dir), missing, "v1") == f"copy {relay_dir}/v1/kvmlab-echo"
    assert sorted(p.name for p in relay_dir.iterdir()) == []
    assert sh(PREPARE_RELAY, str(relay_dir), str(program), "v1") == str(program)

    echo_port, relay_port = _udp_port(), _udp_port()
    counts = relay_dir / "counts"
    echo = subprocess.Popen([program, str(echo_port)])
    relay = [str(program), str(relay_port), "127.0.0.1", str(echo_port), str(counts)]
    try:
        started = sh(START_RELAY, str(relay_dir), "10", *relay)  # returns once it listens
        held = run_sh(START_RELAY, str(relay_dir), "10", *relay)  # the port is taken now
        assert held.returncode == 8 and "cannot listen on UDP port" in held.stderr, held
        assert started == "" and _exchange(relay_port, 100) == 100
        echo.kill()  # from outside: the guest's echo gone
        echo.wait()
        assert _exchange(relay_port, 20, wait=0.05) == 0
        read = sh(STOP_RELAY, str(relay_port), str(relay_dir), "10")
        t0 = time.monotonic()
        gone = run_sh(STOP_RELAY, str(relay_port), str(relay_dir), "10")
        assert gone.returncode == 7 and "not running" in gone.stderr, gone
        assert time.monotonic() - t0 < 5, "it waited for counts no relay could write"
    finally:
        subprocess.run(["pkill", "-f", f"/kvmlab-echo {relay_port} [0-9]"], check=False)
        if echo.poll() is None:
            echo.kill()
        echo.wait()
    # from the prober, sent on, back from the echo, returned to the prober
    assert [int(n) for n in read.split()] == [120, 120, 100, 100]
    assert not counts.exists()


def test_the_peer_s_directory_is_never_followed(tmp_path: Path) -> None:
    """What a guest's user may plant at kvmlab's path in the peer's /tmp: a link to a
    directory is refused and its target untouched; a link inside kvmlab's own directory
    is removed, not followed."""
    from kvmlab.net.migration_path import PREPARE_RELAY, STOP_RELAY

    def sh(script: str, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["sh", "-c", script, "sh", *args], capture_output=True, text=True, timeout=60
        )

    precious = tmp_path / "etc"
    (precious / "keep").mkdir(parents=True)
    (precious / "counts").write_text("the guest's own\n")
    mode = precious.stat().st_mode
    planted = tmp_path / "kvmlab-relay"
    planted.symlink_to(precious)
    refused = sh(PREPARE_RELAY, str(planted), "/nonexistent", "v1")
    assert refused.returncode == 6 and "not kvmlab's" in refused.stderr, refused
    assert sh(STOP_RELAY, "1", str(planted), "0").returncode == 0
    assert (precious / "keep").is_dir() and (precious / "counts").exists()
    assert precious.stat().st_mode == mode  # no chmod through the link

    planted.unlink()
    planted.mkdir()
    (planted / "v1").symlink_to(precious)  # this version's name, a link
    (planted / ".hidden").symlink_to(precious)
    ok = sh(PREPARE_RELAY, str(planted), "/nonexistent", "v1")
    assert ok.returncode == 0 and ok.stdout.strip() == f"copy {planted}/v1/kvmlab-echo", ok
    assert sorted(p.name for p in planted.iterdir()) == []
    assert (precious / "keep").is_dir() and (precious / "counts").exists()


def test_a_path_that_failed_on_the_probe_s_side_judges_the_guest_without_it() -> None:
    """The engine's rule: a packet path that stopped answering because a part of the
    probe's own failed (a peer's relay) probes the guest without that part; the guest's
    answer there decides the check, and a part that cannot be checked fails it."""
    from kvmlab.migrate.guestside import Check
    from kvmlab.migrate.observers import _judged_apart

    failed = Check("packet path", False, "no echo in the last 1 s of probing")
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as guest:
        guest.bind(("127.0.0.1", 0))
        guest.settimeout(0.1)
        port = guest.getsockname()[1]
        stop = threading.Event()

        def echo() -> None:
            while not stop.is_set():
                with contextlib.suppress(TimeoutError):
                    data, peer = guest.recvfrom(64)
                    guest.sendto(data, peer)

        echoing = threading.Thread(target=echo)
        echoing.start()
        try:
            target = ("127.0.0.1", port, lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM))
            judged = _judged_apart(("the peer's relay stopped", target), failed)
        finally:
            stop.set()
            echoing.join()
    assert judged.ok and "the guest echoed" in judged.evidence, judged
    assert judged.evidence.startswith("the peer's relay stopped"), judged

    silent = ("127.0.0.1", _udp_port(), lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM))
    judged = _judged_apart(("the peer's relay stopped", silent), failed)
    assert not judged.ok and "echoed none" in judged.evidence, judged
    judged = _judged_apart(("the probe's own parts could not be checked: agent", None), failed)
    assert not judged.ok and judged.evidence.startswith(failed.evidence), judged
