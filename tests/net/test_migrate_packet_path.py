"""Guests migrated with probes on their packet path, through the CLI as a user types it
(labs/vhost-migrate.toml). On a testpmd vswitch: the switch forwards to the
destination after the switch-over, every hop is counted, and a loss made in the guest from
outside (its echo killed for a second by another `kvmlab exec`, while the probes run) is
placed at the guest's hop. On a lab network, with probes from a peer guest there: the
destination's tap is on the bridge and the guest answers there; the tap taken off its
bridge by another process turns the verdict to FAILED."""

from __future__ import annotations

import json
import re
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kvmlab.migrate.pathprobe import HopCount, hop_losses
from tests.conftest import KVMLAB, cli, lab_up

pytestmark = pytest.mark.functional

ADDRESS = "vhost-migrate/vm"
MIGRATE = ["migrate", ADDRESS, "--dirty", "20", "--dirty-mem", "64", "-o", "json"]
ECHO_GAP = (
    "for p in /proc/[0-9]*; do [ \"$(tr '\\0' ' ' < $p/cmdline 2>/dev/null)\" = "
    "'/bin/kvmlab-echo 7778 ' ] && kill ${p#/proc/}; done; sleep 1; "
    "exec /bin/kvmlab-echo 7778"
)
"""In the guest: the packet path's echo killed, and started again a second later (in the
background: the agent's answer does not wait for it, nor for the switch-over)."""
BACKGROUND = "({}) </dev/null >/dev/null 2>&1 &"


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    tmp = tmp_path_factory.mktemp("vhostmig")
    with lab_up(tmp, "vhost-migrate.toml", "vhost-migrate") as env:
        yield env


def started(env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    """kvmlab running, its output piped (read while it runs)."""
    pipe = subprocess.PIPE
    return subprocess.Popen(
        [KVMLAB, *args], env=env, stdout=pipe, stderr=pipe, stdin=subprocess.DEVNULL, text=True
    )


def losses(path: dict[str, Any]) -> dict[str, int]:
    """Probes lost at each hop of a run's packet path."""
    hops = [HopCount(h["hop"], h["packets"]) for h in path["hops"]]
    return {hop.name: lost for hop, lost, _ in hop_losses(hops)}


def test_the_switch_forwards_to_the_destination_and_a_loss_in_the_guest_is_placed_there(
    lab: dict[str, str],
) -> None:
    proc = started(lab, *MIGRATE)
    assert proc.stderr is not None and proc.stdout is not None
    faults: list[subprocess.CompletedProcess[str]] = []
    err: list[str] = []

    def read_and_strike() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            err.append(line)
            if "packet path: UDP at 1 kHz" in line and not faults:
                # another process, through the guest agent, while the probes run
                faults.append(
                    cli(lab, "exec", ADDRESS, "--", "sh", "-c", BACKGROUND.format(ECHO_GAP))
                )

    reader = threading.Thread(target=read_and_strike)
    reader.start()
    out_text = proc.stdout.read()
    proc.wait(timeout=600)
    reader.join()
    assert faults and faults[0].returncode == 0, (faults, "".join(err)[-3000:])
    out = json.loads(out_text)
    assert out["verdict"] == "VERIFIED", "".join(err)[-3000:]
    path = out["packet_path"]
    assert "testpmd switch port vm0" in path["path"], path
    # the switch forwards to the destination: the guest answered there to the end (else
    # the check fails, and the gap runs to its window's ceiling, 10 s and more)
    check = next(c for c in out["checks"]["after"] if c["name"] == "packet path")
    assert check["ok"], check
    assert path["downtime_ms"] is not None and 0 < path["downtime_ms"] < 10_000, path
    hops = {h["hop"]: h["packets"] for h in path["hops"]}
    names = list(hops)
    assert names[0] == "sent" and names[-1] == "echoed", names
    # before the switch, nothing is lost: the bridge and the switch took every probe (a
    # frame of the host's own may join: it is told apart, not counted as a probe)
    lost = losses(path)
    assert lost["bridge from host"] == lost["bridge to switch"] == lost["switch in"] == 0, hops
    # the fault is placed where it was made
    worst = max(lost, key=lambda name: lost[name])
    assert worst == "guest out", lost
    assert lost["guest out"] >= 500, lost  # a second without an echo: ~1,000 probes at 1 kHz
    # nothing of the probe is left: the bridge (and its namespace), the guest's set-up
    assert not (Path(lab["KVMLAB_RUN_DIR"]) / "vhost-migrate" / ".pathprobe").exists()
    ip = cli(lab, "exec", ADDRESS, "--", "ip", "-o", "addr")
    assert ip.returncode == 0 and "192.0.2.2" not in ip.stdout, ip.stdout


LAN = "vhost-migrate/lan"
NETNS = "/run/netns/kvmlab-vhost-migrate-net"


def test_a_guest_on_a_lab_network_keeps_its_network(lab: dict[str, str]) -> None:
    run = cli(lab, "migrate", LAN, "--dirty", "10", "--dirty-mem", "32", "-o", "json")
    assert run.returncode == 0, run.stderr[-3000:]
    out = json.loads(run.stdout)
    assert out["verdict"] == "VERIFIED"
    path = out["packet_path"]
    # the probes cross the guest's link from its peer guest there, relayed both ways
    assert "peer guest vhost-migrate/peer" in path["path"], path
    assert "10.76.0.10:7778" in path["path"], path
    hops = {h["hop"]: h["packets"] for h in path["hops"]}
    assert list(hops)[:3] == ["sent", "peer from host", "peer to guest"], hops
    assert list(hops)[-3:] == ["peer from guest", "peer to host", "echoed"], hops
    assert hops["peer to host"] >= hops["echoed"] > 0, hops  # what came back, the peer returned
    check = next(c for c in out["checks"]["after"] if c["name"] == "packet path")
    assert check["ok"], check
    # the destination's tap is on the bridge (beside the peer's), the source's went with
    # its QEMU
    links = subprocess.run(
        ["nsenter", f"--net={NETNS}", "--", "ip", "-o", "link", "show", "master", "kvbr0"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert len(links.splitlines()) == 2, links
    assert links.count(" kvu") == 1, links  # the destination's name: the other of two
    ping = subprocess.run(
        [
            "nsenter",
            f"--net={NETNS}",
            "--",
            "ping",
            "-c",
            "3",
            "-i",
            "0.2",
            "-W",
            "2",
            "10.76.0.10",
        ],
        capture_output=True,
        text=True,
    )
    assert ping.returncode == 0, ping.stdout + ping.stderr


def test_a_destination_tap_taken_off_its_bridge_fails_the_verdict(lab: dict[str, str]) -> None:
    proc = started(lab, "migrate", LAN, "--dirty", "10", "--dirty-mem", "32", "-o", "json")
    assert proc.stderr is not None and proc.stdout is not None
    cut: list[str] = []
    err: list[str] = []

    def read_and_cut() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            err.append(line)
            found = re.search(r"taps onto the lab's bridges: (\S+) on", line)
            if found and not cut:
                tap = found.group(1)
                enter = ["nsenter", f"--net={NETNS}", "--"]
                deadline = time.monotonic() + 30
                while time.monotonic() < deadline:  # once kvmlab has put it on the bridge
                    shown = subprocess.run(
                        [*enter, "ip", "-o", "link", "show", tap], capture_output=True, text=True
                    )
                    if " master kvbr0 " in shown.stdout:
                        subprocess.run([*enter, "ip", "link", "set", tap, "nomaster"], check=True)
                        cut.append(tap)
                        break
                    time.sleep(0.02)

    reader = threading.Thread(target=read_and_cut)
    reader.start()
    out_text = proc.stdout.read()
    code = proc.wait(timeout=600)
    reader.join()
    assert cut, "".join(err)[-3000:]
    out = json.loads(out_text)
    assert code == 5 and out["verdict"] == "FAILED", "".join(err)[-3000:]
    failed = [c["name"] for c in out["checks"]["after"] if not c["ok"]]
    assert failed == ["packet path"], out["checks"]["after"]
    lost = losses(out["packet_path"])
    assert max(lost, key=lambda name: lost[name]) == "guest in", lost  # lost before the guest
    # the guest itself is whole: put the tap back and it answers again
    subprocess.run(
        ["nsenter", f"--net={NETNS}", "--", "ip", "link", "set", cut[0], "master", "kvbr0"],
        check=True,
    )
    assert cli(lab, "exec", LAN, "--", "true").returncode == 0


PEER = "vhost-migrate/peer"
HOLD_7779 = (
    "import socket, time; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); "
    "s.bind(('0.0.0.0', 7779)); time.sleep(900)"
)
"""In the peer (it boots the host's root: python3 is there): the relay's port, held."""
BOUND = (
    "i=0; until grep -qi ':1E63 ' /proc/net/udp; do "
    "i=$((i + 1)); [ $i -lt 600 ] || exit 1; sleep 0.1; done"
)
"""In the peer: wait (at most a minute) until UDP port 7779 is bound."""


def test_the_peer_s_faults_are_not_the_migrated_guest_s(lab: dict[str, str]) -> None:
    """The peer's relay killed from outside while the guest migrates: the path stops
    answering, but the peer is found at fault and the guest, probed without it from the
    host's address, answers: VERIFIED. The relay's port held by another program in the
    peer: the probes come from the host's address instead, and the path says why."""
    # capped bandwidth: the precopy lasts seconds, long enough for the relay's kill (itself a
    # guest command, slow on a busy host) to land before the path is probed after it
    proc = started(
        lab, "migrate", LAN, "--dirty", "10", "--dirty-mem", "32", "--bandwidth", "20", "-o", "json"
    )
    assert proc.stderr is not None and proc.stdout is not None
    killed: list[subprocess.CompletedProcess[str]] = []
    err: list[str] = []

    def read_and_kill() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            err.append(line)
            if line.startswith("kvmlab: migrating ") and not killed:
                killed.append(cli(lab, "exec", PEER, "--", "pkill", "-f", "kvmlab-echo 7779"))

    reader = threading.Thread(target=read_and_kill)
    reader.start()
    out_text = proc.stdout.read()
    code = proc.wait(timeout=600)
    reader.join()
    assert killed and killed[0].returncode == 0, (killed, "".join(err)[-3000:])
    out = json.loads(out_text)
    assert code == 0 and out["verdict"] == "VERIFIED", "".join(err)[-3000:]
    check = next(c for c in out["checks"]["after"] if c["name"] == "packet path")
    assert check["ok"] and "its relay stopped" in check["evidence"], check
    assert "the guest echoed" in check["evidence"], check
    path = out["packet_path"]
    assert "its relay stopped" in path["path"], path
    # the gap and loss are the peer's: left out, with why
    assert path["downtime_ms"] is None and "relay stopped" in path["not_measured"], path
    left = cli(lab, "exec", PEER, "--", "sh", "-c", "pgrep -f kvmlab-ech[o] || true")
    assert left.stdout.strip() == "", left.stdout

    hold = f'(python3 -c "{HOLD_7779}" </dev/null >/dev/null 2>&1 &)'
    assert cli(lab, "exec", PEER, "--", "sh", "-c", hold).returncode == 0
    try:
        assert cli(lab, "exec", PEER, "--", "sh", "-c", BOUND).returncode == 0
        run = cli(lab, "migrate", LAN, "--dirty", "10", "--dirty-mem", "32", "-o", "json")
        assert run.returncode == 0, run.stderr[-3000:]
        path = json.loads(run.stdout)["packet_path"]
        assert "not from the peer guest" in path["path"], path
        assert "cannot listen on UDP port 7779" in path["path"], path
        assert [h["hop"] for h in path["hops"]] == ["sent", "guest in", "guest out", "echoed"]
    finally:
        cli(lab, "exec", PEER, "--", "pkill", "-f", "s.bind")
