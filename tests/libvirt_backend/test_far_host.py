"""A lab over two "hosts": this one, and a network namespace reached over a veth pair
whose private libvirtd (a kvmlab of its own: run directory, domains and image store) kvmlab
reaches only through its ``qemu+tcp://`` URI on that link (tests/libvirt_backend/conftest.py
``far_host``). The lab comes up on both, ``exec``/``ps`` find each guest where it runs, a
guest migrates to the far host with a dirtying workload, verified, with the downtime its
network saw, and back, and ``down`` leaves nothing on either."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import cli
from tests.libvirt_backend.conftest import Daemon, FarHost, far_host

pytestmark = pytest.mark.functional


@pytest.fixture(scope="module")
def far(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FarHost]:
    with far_host(tmp_path_factory.mktemp("far"), "far") as host:
        yield host


def free_tcp_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _domains(uri: str, pools: bool = False) -> list[str]:
    """The daemon's domains (and, with ``pools``, its storage pools: kvmlab's image store)."""
    import libvirt

    conn = libvirt.open(uri)
    try:
        names = [d.name() for d in conn.listAllDomains(0)]
        if pools:
            names += [f"pool {p.name()}" for p in conn.listAllStoragePools(0)]
        return sorted(names)
    finally:
        conn.close()


def test_a_lab_over_two_hosts_runs_and_migrates_between_them(
    libvirtd: Daemon, far: FarHost, tmp_path: Path
) -> None:
    lab = tmp_path / "spread.toml"
    lab.write_text(
        'name = "spread"\n'
        '[guests.here]\nvcpus = 1\nmemory = "512M"\nmigratable = true\n'
        '[[guests.here.nics]]\ntype = "user"\n'
        f"forwards = [{{ host_port = {free_tcp_port()}, guest_port = 22 }}]\n"
        f'[guests.there]\nmemory = "512M"\nlibvirt_uri = "{far.uri}"\n'
    )
    env = libvirtd.env
    up = cli(env, "up", str(lab), "--backend", "libvirt", "--connect", libvirtd.uri, timeout=900)
    try:
        assert up.returncode == 0, up.stderr[-3000:]
        assert _domains(libvirtd.uri) == ["spread-here"]
        assert _domains(far.uri) == ["spread-there"]
        for guest in ("here", "there"):
            ran = cli(env, "exec", f"spread/{guest}", "--", "cat", "/proc/sys/kernel/hostname")
            assert ran.returncode == 0 and ran.stdout.strip() == guest, ran.stderr
        rows = json.loads(cli(env, "ps", "-o", "json").stdout)
        assert sorted((r["address"], r["state"]) for r in rows) == [
            ("spread/here", "running"),
            ("spread/there", "running"),
        ]
        moved = cli(
            env,
            "migrate",
            "spread/here",
            "--to",
            far.uri,
            "--dirty",
            "20",
            "-o",
            "json",
            timeout=900,
        )
        assert moved.returncode == 0, moved.stderr[-3000:] + moved.stdout[-3000:]
        doc = json.loads(moved.stdout)
        print(moved.stderr[-1500:], json.dumps(doc["network"]), doc["libvirt_job"])
        assert doc["verdict"] == "VERIFIED", doc["checks"]
        assert doc["libvirt_job"]["memory_total"] > 0
        # the network's view: probes to this host's forward, then to the far host's
        assert far.address in doc["network"]["path"], doc["network"]
        assert doc["network"]["downtime_ms"] > 0 and doc["network"]["probes_sent"] > 0, doc
        assert _domains(libvirtd.uri) == [] and _domains(far.uri) == [
            "spread-here",
            "spread-there",
        ]
        ran = cli(env, "exec", "spread/here", "--", "cat", "/proc/sys/kernel/hostname")
        assert ran.returncode == 0 and ran.stdout.strip() == "here", ran.stderr
        # and back: the probe's forward the far host's QEMU was given is not carried here
        # (this host has no such address: QEMU would not start), and from a guest on
        # another host there is no probe, said so
        back = cli(env, "migrate", "spread/here", "--to", libvirtd.uri, "-o", "json", timeout=900)
        (tmp_path / "back.json").write_text(back.stdout)
        assert back.returncode == 0, back.stderr[-3000:] + back.stdout[:1500]
        doc = json.loads(back.stdout)
        assert doc["verdict"] == "VERIFIED", doc["checks"]
        assert "whose forwards this host cannot reach" in doc["network"]["path"], doc["network"]
        assert _domains(libvirtd.uri) == ["spread-here"]
    finally:
        down = cli(env, "down", "spread", timeout=300)
    assert down.returncode == 0, down.stderr
    assert _domains(libvirtd.uri, pools=True) == [] and _domains(far.uri, pools=True) == []
