"""The DPDK write-up's domain (two vhost-user NICs on a testpmd of the user's own, guest
RAM on 1 GiB huge pages), imported as written (``kvmlab import FILE --boot-image``), boots
with ``kvmlab up`` once what it takes from the host is there: before, ``up`` refuses in one
line, naming what is missing and the command, and creates nothing; with the user's testpmd
serving its sockets and the pages reserved (by the test, as the user would), the guest is up
with its three NICs and its RAM on the huge pages. A host that cannot find 3 GiB of
contiguous memory for 1 GiB pages (this kind, often) gets the same 3 GiB as 2 MiB pages,
the one line of the lab changed (said where it is done)."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import cli

pytestmark = pytest.mark.functional

DATA = Path(__file__).resolve().parents[1] / "spec" / "data" / "import"
POOLS = Path("/sys/kernel/mm/hugepages")
GIB = 1 << 30


def _read(pool: Path, name: str) -> int:
    return int((pool / name).read_text())


def _free(pool: Path) -> int:
    return _read(pool, "free_hugepages") - _read(pool, "resv_hugepages")


@pytest.fixture
def pools() -> Iterator[dict[str, int]]:
    """The huge page pools' sizes, given back as found after the test."""
    before = {p.name: _read(p, "nr_hugepages") for p in POOLS.glob("hugepages-*")}
    try:
        yield before
    finally:
        for name, count in before.items():
            (POOLS / name / "nr_hugepages").write_text(f"{count}\n")


def _reserve(pool: Path, pages: int) -> bool:
    """``pages`` free pages in ``pool``, if the kernel finds them."""
    want = _read(pool, "nr_hugepages") + max(pages - _free(pool), 0)
    (pool / "nr_hugepages").write_text(f"{want}\n")
    return _free(pool) >= pages


def test_the_dpdk_write_up_s_domain_boots_once_its_switch_and_pages_are_there(
    tmp_path: Path, short_tmp: Path, pools: dict[str, int]
) -> None:
    if shutil.which("dpdk-testpmd") is None:
        pytest.skip("dpdk-testpmd is not installed (make deps installs it)")
    xml = (DATA / "vhost-user-hugepages.xml").read_text()
    sockets = [short_tmp / "vhost-user1", short_tmp / "vhost-user2"]
    xml = xml.replace("/tmp/vhost-user", str(short_tmp / "vhost-user"))
    (tmp_path / "domain.xml").write_text(xml)
    lab = tmp_path / "dpdk.toml"
    env = {**os.environ, "KVMLAB_RUN_DIR": str(tmp_path / "run")}
    made = cli(env, "import", str(tmp_path / "domain.xml"), "--boot-image", "--out", str(lab))
    assert made.returncode == 0, made.stderr

    refused = cli(env, "up", str(lab))
    assert refused.returncode == 4, refused.stderr
    (line,) = [x for x in refused.stderr.splitlines() if x.startswith("kvmlab:")]
    assert f"nics[1].socket: nothing serves {sockets[0]}" in line
    assert "dpdk-testpmd --vdev" in line
    assert not (tmp_path / "run" / "vhuser-test1").exists(), "nothing half-done"

    switch = subprocess.Popen(
        [
            "dpdk-testpmd",
            "-l",
            "0,1",
            "--main-lcore",
            "0",
            "--no-pci",
            "--no-huge",
            "-m",
            "512",
            "--file-prefix",
            "kvtest-import",
            *("--vdev", f"net_vhost0,iface={sockets[0]}"),
            *("--vdev", f"net_vhost1,iface={sockets[1]}"),
            "--",
            "-i",
            "--total-num-mbufs=4096",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120
        while not all(s.is_socket() for s in sockets):
            assert switch.poll() is None, "testpmd exited"
            assert time.monotonic() < deadline, "testpmd made no sockets"
            time.sleep(0.2)
        gib = POOLS / "hugepages-1048576kB"
        if _free(gib) < 3:  # the domain's 3 GiB of NUMA cells on 1 GiB pages
            short = cli(env, "up", str(lab))
            assert short.returncode == 4, short.stderr
            assert "guest RAM needs 3 free huge pages of 1G" in short.stderr
            assert f"> {gib}/nr_hugepages), then kvmlab up again" in short.stderr
        pool, pages = gib, 3
        if not _reserve(gib, 3):  # a host without 3 GiB of contiguous memory (this kind,
            pool, pages = POOLS / "hugepages-2048kB", 1536  # often): the 2 MiB pages of
            lab.write_text(lab.read_text().replace('hugepage_size = "1G"', 'hugepage_size = "2M"'))
            assert _reserve(pool, pages), "no 3 GiB of 2 MiB pages"  # the same 3 GiB
        free_before = _free(pool)
        up = cli(env, "up", str(lab), timeout=900)
        try:
            assert up.returncode == 0, up.stderr[-3000:]
            links = cli(env, "exec", "vhuser-test1/vhuser-test1", "--", "ls", "/sys/class/net")
            assert links.returncode == 0, links.stderr
            assert len(links.stdout.split()) == 4, links.stdout  # lo and the domain's 3 NICs
            assert _free(pool) <= free_before - pages, "guest RAM is on the huge pages"
        finally:
            down = cli(env, "down", "vhuser-test1", timeout=300)
            assert down.returncode == 0, down.stderr
    finally:
        if switch.stdin is not None:
            switch.stdin.close()
        switch.terminate()
        try:
            switch.wait(30)
        except subprocess.TimeoutExpired:
            switch.kill()
            switch.wait()
