"""A guest on a testpmd vswitch migrated with probes on its packet path, through the CLI as
a user types it (labs/vhost-user-migrate.toml): the switch forwards to the destination
after the switch-over, every hop is counted, and a loss made in the guest from outside
(its echo killed for a second by another `kvmlab exec`) is placed at the guest's hop."""

from __future__ import annotations

import json
import subprocess
import threading
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
    with lab_up(tmp, "vhost-user-migrate.toml", "vhost-migrate") as env:
        yield env


def losses(path: dict[str, Any]) -> dict[str, int]:
    """Probes lost at each hop of a run's packet path."""
    hops = [HopCount(h["hop"], h["packets"]) for h in path["hops"]]
    return {hop.name: lost for hop, lost, _ in hop_losses(hops)}


def test_the_switch_forwards_to_the_destination_and_every_hop_is_counted(
    lab: dict[str, str],
) -> None:
    run = cli(lab, *MIGRATE)
    assert run.returncode == 0, run.stderr[-3000:]
    out = json.loads(run.stdout)
    assert out["verdict"] == "VERIFIED"
    path = out["packet_path"]
    assert "testpmd switch port vm0" in path["path"], path
    # the path came back: echoes came steadily after the switch-over (else the gap would
    # run to the window's ceiling, 30 s and more)
    assert path["downtime_ms"] is not None and 0 < path["downtime_ms"] < 10_000, path
    hops = {h["hop"]: h["packets"] for h in path["hops"]}
    names = list(hops)
    assert names[0] == "sent" and names[-1] == "echoed", names
    assert hops["echoed"] > hops["sent"] / 2, hops
    # before the switch, nothing is lost: the bridge and the switch took every probe
    assert hops["sent"] == hops["bridge from host"] == hops["switch in"], hops
    # the run's files are gone: the bridge (and its namespace) and the guest's set-up
    assert not (Path(lab["KVMLAB_RUN_DIR"]) / "vhost-migrate" / ".pathprobe").exists()
    ip = cli(lab, "exec", ADDRESS, "--", "ip", "-o", "addr")
    assert ip.returncode == 0 and "192.0.2.2" not in ip.stdout, ip.stdout


def test_a_loss_made_in_the_guest_is_placed_at_the_guest(lab: dict[str, str]) -> None:
    proc = subprocess.Popen(
        [KVMLAB, *MIGRATE],
        env=lab,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )
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
    lost = losses(out["packet_path"])
    worst = max(lost, key=lambda name: lost[name])
    assert worst == "guest out", lost
    assert lost["guest out"] >= 500, lost  # a second without an echo: ~1,000 probes at 1 kHz
