"""When the libvirt backend needs a domain's QEMU as root, and what it does without leave;
the relay socket of a guest hypervisor when it cannot be found. No daemon: the backend's
capabilities are given, the domain is a stand-in."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvmlab.errors import StateError
from kvmlab.render.libvirt_caps import LibvirtCaps
from kvmlab.runtime.libvirt.backend import LibvirtBackend
from kvmlab.runtime.libvirt.conn import LibvirtFailure
from kvmlab.runtime.libvirt.lookup import guest_mark
from kvmlab.runtime.libvirt.machine import LibvirtMachine
from kvmlab.runtime.machine import MachineConfig
from kvmlab.spec import LoadedLab, load_lab

HERE, FAR = "qemu:///system", "qemu+tcp://far.example/system"
USER = (64055, 64055)  # libvirt-qemu, not in any group of the test's directories


def backend(allow: bool = False) -> LibvirtBackend:
    b = LibvirtBackend(HERE, allow_root=allow)
    for uri in (HERE, FAR):
        b._caps[uri], b._conns[uri] = LibvirtCaps(version=9000000, qemu_user=USER), object()
    return b


def lab(tmp_path: Path, text: str) -> LoadedLab:
    (tmp_path / "r.toml").write_text('name = "r"\n' + text)
    return load_lab(tmp_path / "r.toml")


SWITCHED = """[switch]
kind = "testpmd"
main_core = 0
cores = "1"
[guests.vm]
memory = { size = "1G", backing = "memfd", shared = true }
nics = [{ type = "vhost-user", port = "p0" }]
"""


def test_vhost_user_on_the_labs_switch_needs_root_and_is_refused_unless_asked(
    tmp_path: Path,
) -> None:
    loaded = lab(tmp_path, SWITCHED)
    why = backend().root_reason(loaded.lab.guests["vm"], start_inner=False)
    assert why is not None and "switch's sockets" in why
    with pytest.raises(LibvirtFailure) as caught:
        backend().check(loaded)
    assert "only when asked" in str(caught.value)
    assert any("--qemu-as-root" in fix for fix in caught.value.fix)
    backend(allow=True)._check_root(loaded, None, False)  # asked: no refusal


def test_a_guest_hypervisor_needs_root_only_when_its_guests_start_and_its_reads_are_closed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Here only the image cache is closed to libvirt's QEMU user (kvmlab's own install may
    or may not be, depending on the machine: the reachability test is stood in for)."""
    import kvmlab.runtime.libvirt.backend as lvlab

    cache = tmp_path / "cache"
    monkeypatch.setenv("KVMLAB_CACHE", str(cache))

    def reachable(path: Path, uid: int, gid: int) -> str | None:
        return "closed for the test" if path.parent == cache else None

    monkeypatch.setattr(lvlab, "why_unreachable", reachable)
    loaded = lab(tmp_path, '[guests.l1]\nnested = true\nmemory = "4G"\n[guests.l1.guests.l2]\n')
    l1 = loaded.lab.guests["l1"]
    assert backend().root_reason(l1, start_inner=False) is None  # L1 alone: no kvmlab inside
    why = backend().root_reason(l1, start_inner=True)
    assert why is not None and f"the guest image cache ({cache})" in why
    monkeypatch.setattr(lvlab, "why_unreachable", lambda *a: None)
    assert backend().root_reason(l1, start_inner=True) is None  # everything readable: no root


def test_a_daemon_elsewhere_never_runs_qemu_as_root(tmp_path: Path) -> None:
    far = f'[guests.vm]\nlibvirt_uri = "{FAR}"\n'
    loaded = lab(tmp_path, SWITCHED.replace("[guests.vm]\n", far))
    assert backend().root_reason(loaded.lab.guests["vm"], start_inner=True) is None


class Dom:
    def __init__(self, xml: str, mark: str | None = None) -> None:
        self.xml, self.mark = xml, mark

    def XMLDesc(self, flags: int) -> str:  # noqa: N802 - libvirt's name
        return self.xml

    def metadata(self, kind: int, uri: str, flags: int) -> str:
        import libvirt

        if self.mark is None:
            raise libvirt.libvirtError("no metadata")
        return self.mark


def machine(dom: Dom, pid: int | None) -> LibvirtMachine:
    config = MachineConfig(
        "n",
        ("l1",),
        ["qemu"],
        Path("/nowhere"),
        "tcg",
        "test",
        1,
        512 << 20,
        boots_image=True,
        children=True,
    )
    m = LibvirtMachine(config, HERE, "<domain/>", "uuid", token="t")
    m._dom, m.pid = dom, pid
    return m


CHANNEL = (
    '<domain><devices><channel type="unix"><source mode="bind" path="/var/lib/libvirt/'
    'qemu/channel/target/domain-1-n-l1/kvmlab.relay.l2"/><target type="virtio" '
    'name="kvmlab.relay.l2"/></channel></devices></domain>'
)


def test_the_relay_socket_is_libvirts_channel_seen_through_qemus_root() -> None:
    got = machine(Dom(CHANNEL), 4242).relay_socket("l2")
    assert got == Path(
        "/proc/4242/root/var/lib/libvirt/qemu/channel/target/domain-1-n-l1/kvmlab.relay.l2"
    )


def test_a_relay_socket_out_of_reach_says_why() -> None:
    with pytest.raises(StateError, match="pid is unknown"):
        machine(Dom(CHANNEL), None).relay_socket("l2")
    with pytest.raises(StateError, match=r"no socket for channel kvmlab\.relay\.l3"):
        machine(Dom(CHANNEL), 4242).relay_socket("l3")


def test_kvmlabs_mark_is_read_whole_or_not_at_all() -> None:
    mark = '<guest xmlns="https://github.com/kvmlab/kvmlab/xmlns/guest/1" lab="n" token="t"/>'
    assert guest_mark(Dom("", mark)) == {"lab": "n", "token": "t"}
    assert guest_mark(Dom("", None)) == {} and guest_mark(Dom("", "<broken")) == {}
