"""The pure parts of ``kvmlab migrate --to``: libvirt's flags and parameters, the
destination XML, libvirt's job statistics as ``virsh domjobinfo`` labels them."""

from __future__ import annotations

from pathlib import Path

import pytest

libvirt = pytest.importorskip("libvirt")

from kvmlab.errors import UsageError  # noqa: E402
from kvmlab.migrate.jobinfo import domjobinfo, job_stats  # noqa: E402
from kvmlab.migrate.modes import Settings  # noqa: E402
from kvmlab.migrate.transports.libvirt import (  # noqa: E402
    dest_xml,
    flags_for,
    ip_literal,
    params_for,
    user_netdev,
)
from kvmlab.runtime.libvirt.conn import is_local  # noqa: E402

XML = """<domain type='qemu' xmlns:qemu='http://libvirt.org/schemas/domain/qemu/1.0'>
  <name>migrate-vm</name>
  <os><type>hvm</type>
    <kernel>/var/lib/libvirt/images/kvmlab/765aef263a11de213c541435-kernel</kernel>
    <initrd>/var/lib/libvirt/images/kvmlab/765aef263a11de213c541435-initrd.img</initrd>
  </os>
  <qemu:commandline>
    <qemu:arg value='-netdev'/>
    <qemu:arg value='user,id=kvnet0,hostfwd=tcp:127.0.0.1:2230-:22,hostfwd=udp::5000-:5000'/>
  </qemu:commandline>
</domain>"""

# recorded: virDomainGetJobStats(VIR_DOMAIN_JOB_STATS_COMPLETED) after a precopy migration
# between two private daemons (libvirt 9.0.0, QEMU 7.2), 2026-11-23
COMPLETED = {
    "type": 3,
    "operation": 3,
    "time_elapsed": 1403,
    "downtime": 123,
    "downtime_net": 120,
    "setup_time": 2,
    "data_total": 537665536,
    "data_processed": 241894791,
    "data_remaining": 0,
    "memory_total": 537665536,
    "memory_processed": 241894791,
    "memory_remaining": 0,
    "memory_bps": 265527435,
    "memory_dirty_rate": 0,
    "memory_page_size": 4096,
    "memory_iteration": 3,
    "memory_postcopy_requests": 0,
    "memory_constant": 76684,
    "memory_normal": 58773,
    "memory_normal_bytes": 240734208,
}


def test_job_stats_keep_the_numbers_domjobinfo_shows() -> None:
    stats = job_stats(COMPLETED)
    assert "type" not in stats and "operation" not in stats
    assert stats["downtime"] == 123.0 and stats["memory_iteration"] == 3.0
    lines = domjobinfo(stats)
    assert lines[0] == "Time elapsed (ms): 1403"
    assert "Total downtime (ms): 123" in lines and "Iteration: 3" in lines


def test_dest_xml_moves_the_image_and_holds_forwards_on_one_host() -> None:
    paths = {"kernel": Path("/pool/x-kernel"), "initrd": Path("/pool/x-initrd.img")}
    xml, held = dest_xml(XML, paths, same_host=True)
    assert "<kernel>/pool/x-kernel</kernel>" in xml and "/pool/x-initrd.img" in xml
    assert held == [("kvnet0", "tcp:127.0.0.1:2230-:22"), ("kvnet0", "udp::5000-:5000")]
    assert "hostfwd" not in xml and "user,id=kvnet0" in xml
    assert 'xmlns:qemu="http://libvirt.org/schemas/domain/qemu/1.0"' in xml
    xml, held = dest_xml(XML, paths, same_host=False)  # another host: its ports are free
    assert held == [] and "hostfwd=tcp:127.0.0.1:2230-:22" in xml


def test_an_earlier_probes_forward_is_never_carried_on() -> None:
    """A migration to another host gave the destination the network probe's forward in its
    XML; the next migration of that guest (back here, say) must not bind it again."""
    probed = XML.replace(
        "hostfwd=udp::5000-:5000'", "hostfwd=udp::5000-:5000,hostfwd=udp:10.253.7.2:40000-:7777'"
    )
    for same_host in (True, False):
        xml, held = dest_xml(probed, {}, same_host=same_host)
        assert ":7777" not in xml and all(":7777" not in rule for _, rule in held)
    xml, _ = dest_xml(probed, {}, same_host=False)
    assert "hostfwd=udp::5000-:5000" in xml  # the lab's own UDP forward stays


def test_flags_and_params_per_mode() -> None:
    live = libvirt.VIR_MIGRATE_LIVE
    assert flags_for(Settings(), False) == live
    assert flags_for(Settings(mode="postcopy"), False) == live | libvirt.VIR_MIGRATE_POSTCOPY
    persistent = flags_for(Settings(), True)
    assert persistent & libvirt.VIR_MIGRATE_PERSIST_DEST
    assert persistent & libvirt.VIR_MIGRATE_UNDEFINE_SOURCE
    with pytest.raises(UsageError, match="through libvirt"):
        flags_for(Settings(mode="dirty-limit"), False)
    params = params_for(
        Settings(mode="multifd", multifd_channels=4, bandwidth_mibs=100),
        "qemu+tcp://127.0.0.1:16509/system",
        "<domain/>",
    )
    assert params[libvirt.VIR_MIGRATE_PARAM_PARALLEL_CONNECTIONS] == 4
    assert params[libvirt.VIR_MIGRATE_PARAM_BANDWIDTH] == 100
    assert params[libvirt.VIR_MIGRATE_PARAM_URI] == "tcp://127.0.0.1"
    # another host: the address kvmlab reached it at, not the name that host reports
    remote = params_for(Settings(), "qemu+tcp://10.253.7.2:16509/system", "<domain/>")
    assert remote[libvirt.VIR_MIGRATE_PARAM_URI] == "tcp://10.253.7.2"
    remote = params_for(Settings(), "qemu+tcp://[fd00::2]:16509/system", "<domain/>")
    assert remote[libvirt.VIR_MIGRATE_PARAM_URI] == "tcp://[fd00::2]"
    named = params_for(Settings(), "qemu+ssh://host2/system", "<domain/>")
    assert libvirt.VIR_MIGRATE_PARAM_URI not in named  # a name is libvirt's to resolve
    # back from another host: this host's address on the route to it (loopback here)
    back = params_for(Settings(), "qemu:///system", "<domain/>", "qemu+tcp://127.0.0.7/system")
    assert back[libvirt.VIR_MIGRATE_PARAM_URI] == "tcp://127.0.0.1"
    back = params_for(Settings(), "qemu:///system", "<domain/>", "qemu+tcp://10.253.7.2/system")
    assert back.get(libvirt.VIR_MIGRATE_PARAM_URI) != "tcp://127.0.0.1"


def test_the_user_netdev_and_the_host_address_of_a_destination() -> None:
    assert user_netdev(XML) == "kvnet0"
    assert user_netdev("<domain xmlns:qemu='http://libvirt.org/schemas/domain/qemu/1.0'/>") is None
    libvirts = "<domain><devices><interface type='user'><alias name='net0'/></interface>"
    assert user_netdev(libvirts + "</devices></domain>") == "hostnet0"
    assert str(ip_literal("qemu+tcp://10.253.7.2:16509/system")) == "10.253.7.2"
    assert ip_literal("qemu+unix:///system?socket=/x") is None
    assert ip_literal("qemu+ssh://host2/system") is None  # never resolved


@pytest.mark.parametrize(
    ("uri", "local"),
    [
        ("qemu:///system", True),
        ("qemu+unix:///system?socket=/x", True),
        ("qemu+tcp://127.0.0.1:16590/system", True),
        ("qemu+tcp://localhost/system", True),
        ("qemu+ssh://host2/system", False),
        ("qemu+tcp://10.0.0.2/system", False),
    ],
)
def test_which_uris_are_this_host(uri: str, local: bool) -> None:
    assert is_local(uri) is local
