"""``kvmlab migrate ADDRESS --to URI``: libvirt's migration between two private daemons
(the second, on a loopback TCP listener, stands in for a second host)."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import KVMLAB, LABS, cli
from tests.libvirt_backend.conftest import Daemon, _start, _stop
from tests.migrate.test_migrate_functional import POKE, POKED_PAGE, POKED_WORD

pytestmark = pytest.mark.functional


@pytest.fixture(scope="module")
def second(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    daemon = _start(tmp_path_factory.mktemp("libvirtd2"), "kvtest2", port)
    try:
        yield daemon
    finally:
        _stop(daemon, "kvtest2")


def _domains(uri: str) -> list[str]:
    import libvirt

    conn = libvirt.open(uri)
    try:
        return [d.name() for d in conn.listAllDomains(0)]
    finally:
        conn.close()


def test_migrate_there_and_back(libvirtd: Daemon, second: Daemon) -> None:
    env = libvirtd.env
    assert second.tcp_uri is not None
    up = cli(
        env,
        "up",
        str(LABS / "migrate.toml"),
        "--variant",
        "one-vcpu",
        "--backend",
        "libvirt",
        "--connect",
        libvirtd.uri,
        timeout=900,
    )
    try:
        assert up.returncode == 0, up.stderr[-3000:]
        same = cli(env, "migrate", "migrate/vm", "--to", libvirtd.uri)
        assert same.returncode == 2 and "runs there already" in same.stderr
        there = cli(
            env,
            "migrate",
            "migrate/vm",
            "--to",
            second.tcp_uri,
            "--dirty",
            "20",
            "-o",
            "json",
            timeout=600,
        )
        assert there.returncode == 0, there.stderr[-3000:] + there.stdout[-3000:]
        doc = json.loads(there.stdout)
        assert doc["verdict"] == "VERIFIED", doc["checks"]
        job = doc["libvirt_job"]
        assert job["time_elapsed"] > 0 and "downtime" in job and job["memory_total"] > 0
        assert doc["samples"], "QEMU's query-migrate was not sampled"
        # the guest's own view: its heartbeats, read through each QEMU's root
        assert doc["guest_downtime_ms"] > 0 and doc["baseline_gap_ms"] > 0, doc
        # and the network's, through the forward libvirt's QEMU holds (moved by kvmlab)
        assert doc["network"]["downtime_ms"] > 0 and doc["network"]["probes_sent"] > 0, doc
        assert _domains(libvirtd.uri) == [] and _domains(second.tcp_uri) == ["migrate-vm"]
        rows = json.loads(cli(env, "ps", "-o", "json").stdout)["guests"]
        assert [(r["address"], r["state"]) for r in rows] == [("migrate/vm", "running")]
        ran = cli(env, "exec", "migrate/vm", "--", "cat", "/proc/sys/kernel/hostname")
        assert ran.returncode == 0 and ran.stdout.strip() == "vm", ran.stderr
        back = poked_migration(env, libvirtd.uri)
        assert back.returncode == 5, back.stderr[-3000:] + back.stdout[-3000:]
        doc = json.loads(back.stdout)
        assert doc["verdict"] == "FAILED" and doc["status"] == "completed", doc["checks"]
        memory = next(c for c in doc["checks"]["after"] if c["name"] == "memory pattern")
        assert not memory["ok"]
        assert f"first={POKED_PAGE} word={POKED_WORD}" in memory["evidence"], memory
        assert doc["guest_downtime_ms"] > 0  # back: the heartbeat file is reused
        assert _domains(libvirtd.uri) == ["migrate-vm"]
    finally:
        down = cli(env, "down", "migrate", timeout=300)
    assert down.returncode == 0, down.stderr
    assert _domains(libvirtd.uri) == [] and _domains(second.tcp_uri) == []


def poked_migration(env: dict[str, str], uri: str) -> subprocess.CompletedProcess[str]:
    """``kvmlab migrate --to URI --mode multifd -o json`` while, as soon as the guest runs
    on the destination (its agent answers through that daemon only then), another process
    in the guest changes one word of the dirtier's working set (the qemu path's fault)."""
    import libvirt

    proc = subprocess.Popen(
        [
            KVMLAB,
            "migrate",
            "migrate/vm",
            "--to",
            uri,
            "--mode",
            "multifd",
            "--dirty",
            "20",
            "--dirty-mem",
            "64",
            "-o",
            "json",
        ],
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    conn = libvirt.open(uri)
    poked: subprocess.CompletedProcess[str] | None = None
    try:
        deadline = time.monotonic() + 600
        agent = _running_there(conn, proc, deadline)
        if agent is not None:  # else the job ended first: its output below says why
            ran = agent.exec(["/bin/sh", "-c", POKE], timeout=60)
            poked = subprocess.CompletedProcess(POKE, ran.returncode, ran.stdout, ran.stderr)
        out, err = proc.communicate(timeout=900)
    finally:
        conn.close()
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            proc.communicate(timeout=300)
    assert poked is not None and poked.returncode == 0, (poked, err[-3000:], out[-3000:])
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def _running_there(conn: Any, proc: subprocess.Popen[str], deadline: float) -> Any:
    """The guest's agent through the destination daemon once the guest runs there; None
    when the job ends (or the domain goes: a failed job) before it does."""
    import libvirt

    from kvmlab.guest.agent_libvirt import LibvirtAgent
    from kvmlab.guest.errors import AgentError

    while time.monotonic() < deadline and proc.poll() is None:
        dom = next(iter(conn.listAllDomains(0)), None)
        if dom is None:
            time.sleep(0.05)
            continue
        try:  # the domain is there from the incoming side on; it runs after the switch
            if dom.state()[0] == libvirt.VIR_DOMAIN_RUNNING:
                agent = LibvirtAgent(dom, "vm")
                agent.wait_ready(timeout=60, attempt=0.2)
                return agent
        except libvirt.libvirtError:  # gone again: the job failed (its output says why)
            pass
        except AgentError:  # it stopped again (a failed attempt) or is not up yet
            pass
        time.sleep(0.05)
    return None


def test_to_refuses_a_qemu_backend_guest_and_bad_uris(tmp_path: Path) -> None:
    import os

    env = {**os.environ, "KVMLAB_RUN_DIR": str(tmp_path / "run")}
    bad = cli(env, "migrate", "nolab/vm", "--to", "qemu+tcp://127.0.0.1:99999/system")
    assert bad.returncode == 2 and "--to" in bad.stderr, bad.stderr
