"""A lab over two "hosts": this one, and a network namespace reached over a veth pair
whose private libvirtd (a kvmlab of its own: run directory, domains and image store) kvmlab
reaches only through its ``qemu+tcp://`` URI on that link (tests/libvirt_backend/conftest.py
``far_host``). The lab comes up on both, ``exec``/``ps`` find each guest where it runs, a
guest migrates to the far host with a dirtying workload and its disk copied (libvirt's NBD
copy into a volume kvmlab makes there), verified, with the downtime its network saw; and
back, with the copy made here corrupted from outside while the job runs, which must fail
the verdict on that disk; and ``down`` leaves nothing on either."""

from __future__ import annotations

import contextlib
import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import KVMLAB, cli
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


FILL_DISK = "dd if=/dev/urandom of=/dev/vda bs=1M count=16 oflag=direct 2>&1 && sync"
"""Random data over the whole 16 MiB disk, written past the guest's page cache."""
WORD_AT = 1048576 + 4096
"""Where the corruption lands in the copy (a raw image: the guest's offset)."""


def copies(run_root: Path) -> list[Path]:
    """The copies of disk ``vda`` in the image store of the daemon whose kvmlab runs there."""
    return sorted(run_root.glob(".libvirtd/*/lib/images/kvmlab/*-vda.raw"))


def sha256(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


def sha256_of_zeros(mib: int) -> str:
    import hashlib

    return hashlib.sha256(bytes(mib << 20)).hexdigest()


@contextlib.contextmanager
def corrupting(run_root: Path) -> Iterator[list[int]]:
    """A thread that, from the copy's appearance until the block, writes 8 bytes into it
    every 20 ms (as another process on that host could); how many writes landed."""
    hits: list[int] = []
    stop = threading.Event()

    def run() -> None:
        while not stop.wait(0.02):
            for copy in copies(run_root):
                with contextlib.suppress(OSError):
                    fd = os.open(copy, os.O_WRONLY)
                    try:
                        os.pwrite(fd, b"kvmlab!!", WORD_AT)
                        os.fsync(fd)
                        hits.append(1)
                    finally:
                        os.close(fd)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    try:
        yield hits
    finally:
        stop.set()
        worker.join()


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
    libvirtd: Daemon, far: FarHost, open_dir: Path, tmp_path: Path
) -> None:
    lab = open_dir / "spread.toml"
    lab.write_text(
        'name = "spread"\n'
        '[guests.here]\nvcpus = 1\nmemory = "512M"\nmigratable = true\n'
        '[[guests.here.nics]]\ntype = "user"\n'
        f"forwards = [{{ host_port = {free_tcp_port()}, guest_port = 22 }}]\n"
        '[[guests.here.disks]]\npath = "here.raw"\nformat = "raw"\nsize = "16M"\n'
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
        # data of the guest's own on its disk, as a user's would be (the disk is made
        # empty: a copy that copied nothing would read back the same)
        wrote = cli(env, "exec", "spread/here", "--", "sh", "-c", FILL_DISK)
        assert wrote.returncode == 0, wrote.stderr
        rows = json.loads(cli(env, "ps", "-o", "json").stdout)["guests"]
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
        disks = next(c for c in doc["checks"]["after"] if c["name"] == "copied disks")
        assert "vda (16 MiB of 16 MiB)" in disks["evidence"], disks
        # read from outside, with another tool: the far host's copy is the lab's image as
        # the guest left it (it no longer writes the source's)
        (copy,) = copies(far.daemon.root)
        assert sha256(copy) == sha256(open_dir / "here.raw") != sha256_of_zeros(16)
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
        # ... and one word of the copy made here changed from outside while the job runs
        # (another process, after libvirt's mirror wrote it): the verdict must turn
        with corrupting(libvirtd.root) as hits:
            back = cli(
                env, "migrate", "spread/here", "--to", libvirtd.uri, "-o", "json", timeout=900
            )
        assert hits, "the copy was corrupted while the job ran"
        (tmp_path / "back.json").write_text(back.stdout)
        doc = json.loads(back.stdout)
        assert doc["verdict"] == "FAILED", doc["checks"]
        failed = [c for c in doc["checks"]["after"] if not c["ok"]]
        assert [c["name"] for c in failed] == ["copied disks"], failed
        assert failed[0]["evidence"].startswith("vda (16 MiB of 16 MiB): sha256"), failed
        assert "whose forwards this host cannot reach" in doc["network"]["path"], doc["network"]
        assert _domains(libvirtd.uri) == ["spread-here"]
    finally:
        down = cli(env, "down", "spread", timeout=300)
    assert down.returncode == 0, down.stderr
    assert _domains(libvirtd.uri, pools=True) == [] and _domains(far.uri, pools=True) == []


def test_a_link_cut_during_the_migration_cancels_it_and_leaves_the_source_whole(
    libvirtd: Daemon, far: FarHost, open_dir: Path
) -> None:
    """The link to the far host goes down while the job runs (another tool: ``ip link``),
    for 40 s: the job is cancelled at --max-time although neither the far daemon nor the
    far QEMU answers (keepalive closes the dead connection), the guest keeps running here
    and passes every check with its disk, and once the link is back nothing of the job is
    left on the far host."""
    import subprocess
    import time

    lab = open_dir / "cut.toml"
    lab.write_text(
        'name = "cut"\n[guests.here]\nvcpus = 1\nmemory = "512M"\nmigratable = true\n'
        '[[guests.here.disks]]\npath = "cut.raw"\nformat = "raw"\nsize = "16M"\n'
    )
    env = libvirtd.env
    up = cli(env, "up", str(lab), "--backend", "libvirt", "--connect", libvirtd.uri, timeout=900)
    out = open_dir / "cut.json"
    try:
        assert up.returncode == 0, up.stderr[-3000:]
        wrote = cli(env, "exec", "cut/here", "--", "sh", "-c", FILL_DISK)
        assert wrote.returncode == 0, wrote.stderr
        argv = ["migrate", "cut/here", "--to", far.uri, "--dirty", "20", "--bandwidth", "8"]
        with out.open("w") as stdout:
            job = subprocess.Popen(
                [KVMLAB, *argv, "--max-time", "10", "-o", "json"],
                env=env,
                stdout=stdout,
                stderr=subprocess.PIPE,
                text=True,
            )
            said = []
            assert job.stderr is not None
            for line in job.stderr:
                said.append(line)
                if "migrating cut/here" in line:
                    time.sleep(1)
                    subprocess.run(["ip", "link", "set", far.link, "down"], check=True)
                    break
            try:
                time.sleep(40)
            finally:
                subprocess.run(["ip", "link", "set", far.link, "up"], check=True)
            said += job.stderr.readlines()
            assert job.wait(timeout=600) == 3, "".join(said)  # not completed
        doc = json.loads(out.read_text())
        assert (doc["status"], doc["cancelled"]) == ("cancelled", "not converged in 10 s"), doc
        source = {c["name"]: c for c in doc["checks"]["source"]}
        assert all(c["ok"] for c in source.values()), source
        assert "vda (16 MiB of 16 MiB)" in source["copied disks"]["evidence"]
        assert _domains(libvirtd.uri) == ["cut-here"]
        assert _domains(far.uri, pools=True) == [], "the job's copy and image are deleted there"
    finally:
        down = cli(env, "down", "cut", timeout=300)
    assert down.returncode == 0, down.stderr
    assert _domains(libvirtd.uri, pools=True) == []
