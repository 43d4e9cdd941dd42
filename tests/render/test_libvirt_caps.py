"""Rendering for the libvirt in front of kvmlab: decisions from recorded capabilities."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest

from kvmlab.errors import RenderError, UsageError
from kvmlab.render import render_libvirt
from kvmlab.render.libvirt_caps import LibvirtCaps, version_text
from kvmlab.spec import load_lab
from tests.conftest import LABS, target_for

RECORDED = Path(__file__).resolve().parent.parent / "golden" / "libvirt"
CAPS = (RECORDED / "capabilities-9.0.0-debian12.xml").read_text()
DOMCAPS = (RECORDED / "domcapabilities-9.0.0-q35-qemu.xml").read_text()
PASST = """<interface supported='yes'><enum name='backendType'><value>default</value>
<value>passt</value></enum></interface>"""


def debian12() -> LibvirtCaps:
    return LibvirtCaps.from_xml(9000000, 7002022, CAPS, DOMCAPS)


def test_recorded_debian12_libvirt_is_parsed() -> None:
    caps = debian12()
    assert caps.label == "libvirt 9.0.0"
    assert not caps.passt  # Debian 12's libvirt refuses <backend type='passt'/>
    assert {"path", "virtiofs"} <= caps.fs_drivers
    assert "maximum" in caps.cpu_modes and "host-passthrough" not in caps.cpu_modes
    assert caps.qemu_user == (64055, 64055)
    assert "memfd" in caps.memory_sources
    assert version_text(10_005_001) == "10.5.1"


def test_passt_is_used_only_where_libvirt_lists_it() -> None:
    newer = LibvirtCaps.from_xml(
        10000000, 8002000, CAPS, DOMCAPS.replace("<devices>", f"<devices>{PASST}", 1)
    )
    assert newer.passt
    loaded = load_lab(LABS / "basic.toml")
    guest = loaded.lab.guests["vm1"]
    target = target_for(loaded, ("vm1",))
    with_passt = render_libvirt(guest, replace(target, libvirt=newer))
    assert '<backend type="passt" />' in with_passt and "portForward" in with_passt
    assert "qemu:commandline" not in with_passt
    slirp = render_libvirt(guest, replace(target, libvirt=debian12()))
    assert 'type="passt"' not in slirp
    assert re.search(r'value="user,id=kvnet0,hostfwd=tcp:127.0.0.1:2222-:22"', slirp)
    assert "rendered for libvirt 9.0.0" in slirp


def test_assumed_caps_say_no_daemon_was_asked() -> None:
    loaded = load_lab(LABS / "basic.toml")
    target = replace(target_for(loaded, ("vm1",)), libvirt=LibvirtCaps.assumed(9000000))
    xml = render_libvirt(loaded.lab.guests["vm1"], target)
    assert "libvirt 9.0.0 assumed, no daemon asked (render -c URI asks one)" in xml


def test_kvm_guest_on_a_libvirt_without_kvm_is_refused() -> None:
    loaded = load_lab(LABS / "basic.toml")
    tcg_only = replace(debian12(), domain_types=frozenset({"qemu"}))
    target = replace(target_for(loaded, ("vm1",), "kvm"), libvirt=tcg_only)
    with pytest.raises(RenderError, match="offers no kvm domain"):
        render_libvirt(loaded.lab.guests["vm1"], target)


def test_nothing_must_exist_before_start() -> None:
    """Serial log in libvirt's log directory, agent socket left to libvirt."""
    loaded = load_lab(LABS / "nested.toml")
    xml = render_libvirt(loaded.lab.guests["l1"], target_for(loaded, ("l1",)))
    assert "/run/kvmlab" not in xml
    assert '<log file="/var/log/libvirt/qemu/nested-l1-serial.log"' in xml


def test_backend_options() -> None:
    from kvmlab.cli.backend_opts import BackendOptions, choose_backend
    from kvmlab.runtime.libvirt.backend import LibvirtBackend

    loaded = load_lab(LABS / "basic.toml")
    assert choose_backend(loaded, BackendOptions(None, None, None)).name == "qemu"
    chosen = choose_backend(
        loaded, BackendOptions("libvirt", "qemu+tcp://127.0.0.1:16510/system", None)
    )
    assert isinstance(chosen, LibvirtBackend) and chosen.uri.startswith("qemu+tcp://")
    assert chosen.on_this_host(loaded.lab.guests["vm1"])  # loopback: a daemon on this host
    with pytest.raises(UsageError, match="need --backend libvirt"):
        choose_backend(loaded, BackendOptions("qemu", None, True))
    with pytest.raises(UsageError, match="not a libvirt URI"):
        choose_backend(loaded, BackendOptions("libvirt", "http://x/system", None))


def test_what_the_libvirt_backend_refuses_names_file_and_key() -> None:
    from kvmlab.runtime.libvirt.backend import refusals

    net = load_lab(LABS / "netcompare.toml")
    assert refusals(net) == []  # taps on the lab's networks, vhost-user on its switch: here
    far = {p.path for p in refusals(net, uri_of=lambda g: "qemu+tcp://far.example/system")}
    assert {"guests.vm1.nics[1]", "guests.vm1.nics[2]", "guests.vm1.nics[3]"} <= far
    assert "guests.vm1.nics[0]" not in far  # user networking runs anywhere
    nested = load_lab(LABS / "nested.toml")
    assert refusals(nested) == []  # a daemon of this host: L2 reached through L1's channel
    far = {p.path for p in refusals(nested, uri_of=lambda g: "qemu+tcp://far.example/system")}
    assert far == {"guests.l1.guests"}
    assert refusals(load_lab(LABS / "basic.toml")) == []


def test_a_guest_hypervisor_may_run_its_qemu_as_root_and_says_why() -> None:
    loaded = load_lab(LABS / "nested.toml")
    target = replace(target_for(loaded, ("l1",)), libvirt_as_root="kvmlab inside reads /x")
    xml = render_libvirt(loaded.lab.guests["l1"], target)
    assert "QEMU runs as root: kvmlab inside reads /x" in xml
    assert re.search(
        r'</devices>\s*<seclabel type="static" model="dac" relabel="no">\s*'
        r"<label>\+0:\+0</label>",
        xml,
    )
    assert "seclabel" not in render_libvirt(loaded.lab.guests["l1"], target_for(loaded, ("l1",)))


def test_a_run_marks_its_domains_with_a_token() -> None:
    loaded = load_lab(LABS / "basic.toml")
    target = replace(target_for(loaded, ("vm1",)), libvirt_token="0123abcd")
    xml = render_libvirt(loaded.lab.guests["vm1"], target)
    assert re.search(r'<metadata>\s*<kvmlab:guest lab="basic" address="vm1" token="0123abcd"', xml)


@pytest.mark.parametrize(
    "uri",
    [
        "qemu:///system",
        "qemu+ssh://user@host/system",
        "qemu+tcp://127.0.0.1:16509/system",
        "qemu+tcp://[::1]:16509/system",
        "qemu+ssh://h/system?keyfile=~/.ssh/id",
        "qemu+unix:///system?socket=/run/kvmlab/.libvirtd/h/sock/libvirt-sock",
    ],
)
def test_libvirt_uris_kvmlab_takes(uri: str) -> None:
    from kvmlab.spec.backend import check_uri

    assert check_uri(uri) == uri


@pytest.mark.parametrize(
    ("uri", "why"),
    [
        ("qemu:///session", "system instance"),
        ("qemu+ssh://-oProxy/system", "'-'"),
        ("qemu+tcp://h:99999/system", "1-65535"),
        ("qemu+tcp://h:abc/system", "system instance"),
        ("qemu+ssh://h/system?no_verify=1", "no_verify"),
        ("qemu+ssh://h/system?command=sh", "command"),
    ],
)
def test_libvirt_uris_kvmlab_refuses(uri: str, why: str) -> None:
    from kvmlab.spec.backend import check_uri

    with pytest.raises(ValueError, match=re.escape(why)):
        check_uri(uri)


def test_a_tap_libvirt_makes_or_takes_as_it_is() -> None:
    """A tap on a lab network (kvmlab's name, checked free) is libvirt's to make and
    delete; a tap the lab names is the user's, taken as it is and never libvirt's."""
    loaded = load_lab(LABS / "multiqueue.toml")
    xml = render_libvirt(loaded.lab.guests["vm"], target_for(loaded, ("vm",)))
    assert '<target dev="kvmlab-mq0" managed="no" />' in xml
    net = load_lab(LABS / "netcompare.toml")
    xml = render_libvirt(net.lab.guests["vm1"], target_for(net, ("vm1",)))
    assert re.findall(r'<target dev="kvt[0-9a-f]+" />', xml)  # libvirt makes them
    assert 'managed="no"' not in xml


def test_a_named_tap_the_host_lacks_is_refused_with_the_command() -> None:
    from kvmlab.runtime.libvirt.backend import _check_taps
    from kvmlab.runtime.libvirt.conn import LibvirtFailure

    guest = load_lab(LABS / "multiqueue.toml").lab.guests["vm"]
    with pytest.raises(LibvirtFailure, match="tap kvmlab-mq0 does not exist") as err:
        _check_taps(guest, "qemu:///system", "multiqueue/vm")
    assert "ip tuntap add dev kvmlab-mq0 mode tap multi_queue" in err.value.fix[0]
    lo = guest.model_copy(update={"nics": [guest.nics[1].model_copy(update={"ifname": "lo"})]})
    _check_taps(lo, "qemu:///system", "multiqueue/vm")  # it exists: taken as it is
    up = guest.model_copy(update={"nics": [guest.nics[1].model_copy(update={"ifname": ".."})]})
    with pytest.raises(LibvirtFailure, match=r"tap \.\. does not exist"):
        _check_taps(up, "qemu:///system", "multiqueue/vm")  # a path, not an interface
