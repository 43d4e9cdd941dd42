"""[networks.NAME] and the NICs on them: addresses given or derived, every mistake named by
its key, the taps QEMU is told to create, what the guest is told to configure."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvmlab.errors import SpecError
from kvmlab.render import render_qemu
from kvmlab.render.identity import tap_name
from kvmlab.runtime.guest_network import address_script, lab_addresses
from kvmlab.runtime.lab import tap_plans
from kvmlab.spec import LoadedLab, parse_lab
from kvmlab.spec.network import addresses
from tests.conftest import target_for

TWO = """name = "n"
[networks.lan]
subnet = "10.77.0.0/24"
[guests.a]
nics = [{ type = "tap", network = "lan", queues = 2 }]
vcpus = 2
[guests.b]
nics = [{ type = "vhost-net", network = "lan", address = "10.77.0.10" }]
"""


def problems(text: str) -> str:
    with pytest.raises(SpecError) as exc:
        parse_lab(text.encode(), "lab.toml")
    return "\n".join(str(p) for p in exc.value.problems)


def test_addresses_given_are_kept_and_the_rest_follow_from_dot_10() -> None:
    lab = parse_lab(TWO.encode(), "lab.toml")
    got = {k: str(v) for k, v in addresses(lab).items()}
    # b took .10 by name, so a (first in lab order, no address) gets .11
    assert got == {(("a",), 0): "10.77.0.11/24", (("b",), 0): "10.77.0.10/24"}
    assert str(lab.networks["lan"].host) == "10.77.0.1/24"


def test_the_guest_is_told_its_address_and_channels_by_mac() -> None:
    lab = parse_lab(TWO.encode(), "lab.toml")
    (nic,) = lab_addresses(lab, ("a",), lab.guests["a"])
    script = address_script([nic])[2]
    assert f'= "{nic.mac}"' in script and "ip addr replace 10.77.0.11/24" in script
    assert 'ethtool -L "$dev" combined 2' in script
    (plain,) = lab_addresses(lab, ("b",), lab.guests["b"])
    assert "ethtool" not in address_script([plain])[2]


def test_qemu_creates_the_tap_kvmlab_names_and_kvmlab_plans_to_move_it() -> None:
    lab = parse_lab(TWO.encode(), "lab.toml")
    loaded = LoadedLab(lab, Path("/labs/lab.toml"), "0")
    argv = render_qemu(lab.guests["b"], target_for(loaded, ("b",))).argv
    tap = tap_name("n", ("b",), 0)
    assert len(tap) <= 15 and tap.startswith("kvt")
    assert any(f"tap,id=net0,ifname={tap},script=no,downscript=no,vhost=on" in a for a in argv)
    plans = tap_plans(lab, ["a", "b"])
    assert [(p.guest, p.network) for p in plans] == [("a", "lan"), ("b", "lan")]
    assert tap_name("n", ("a",), 0) != tap


@pytest.mark.parametrize(
    ("text", "key", "says"),
    [
        (
            '[guests.a]\nnics = [{ type = "tap", network = "wan" }]',
            "guests.a.nics[0].network",
            "no network 'wan'",
        ),
        (
            '[networks.lan]\n[guests.a]\nnics = [{ type = "tap", network = "lan", address = '
            '"10.9.0.5" }]',
            "guests.a.nics[0].address",
            "not a guest address of 10.77.0.0/24",
        ),
        (
            '[networks.lan]\n[guests.a]\nnics = [{ type = "tap", network = "lan", address = '
            '"10.77.0.1" }]',
            "guests.a.nics[0].address",
            "the host side is 10.77.0.1",
        ),
        (
            '[networks.lan]\n[guests.a]\nnics = [{ type = "tap", network = "lan", address = '
            '"10.77.0.12" }]\n[guests.b]\nnics = [{ type = "tap", network = "lan", address = '
            '"10.77.0.12" }]',
            "guests.b.nics[0].address",
            "already guests.a.nics[0]'s",
        ),
        (
            '[networks.lan]\n[guests.a]\nnics = [{ type = "tap", network = "lan", ifname = "t0" }]',
            "guests.a.nics[0].ifname",
            "kvmlab names the taps",
        ),
        (
            '[guests.a]\nnics = [{ type = "tap", address = "10.1.1.1" }]',
            "guests.a.nics[0].address",
            "needs network",
        ),
        (
            '[networks.lan]\n[networks.lan2]\nsubnet = "10.77.0.128/25"\n[guests.a]',
            "networks.lan2.subnet",
            "overlaps networks.lan",
        ),
        (
            '[networks.lan]\nsubnet = "10.1.1.0/30"\n[guests.a]',
            "networks.lan.subnet",
            "too few guests",
        ),
        ('[networks.lan]\nsubnet = "127.0.0.0/8"\n[guests.a]', "networks.lan.subnet", "loopback"),
        (
            '[networks.lan]\nsubnet = "169.254.0.0/16"\n[guests.a]',
            "networks.lan.subnet",
            "link-local",
        ),
        ('[networks.lan]\nsubnet = "0.0.0.0/8"\n[guests.a]', "networks.lan.subnet", "unspecified"),
        (
            '[networks.lan]\nsubnet = "8.8.8.0/24"\n[guests.a]',
            "networks.lan.subnet",
            "not a private range",
        ),
        (
            '[networks.lan]\nsubnet = "10.0.2.0/24"\n[guests.a]',
            "networks.lan.subnet",
            "overlaps user networking",
        ),
        (
            '[networks.lan]\nsubnet = "10.77.0.5/24"\n[guests.a]',
            "networks.lan.subnet",
            "did you mean 10.77.0.0/24",
        ),
        (
            '[networks.lan]\nsubnet = "10.9.0.0/28"\n[guests.a]\nnics = ['
            + ", ".join(['{ type = "tap", network = "lan" }'] * 6)
            + "]",
            "guests.a.nics[5].network",
            "no free address left",
        ),
        (
            '[switch]\nkind = "testpmd"\n[networks.lan]\n[guests.a]\nmemory = { size = "1G", '
            'backing = "memfd", shared = true }\nnics = [{ type = "vhost-user", port = "p", '
            'address = "10.77.0.50/24" }]',
            "guests.a.nics[0].address",
            "overlaps networks.lan",
        ),
        (
            '[switch]\nkind = "testpmd"\n[guests.a]\n'
            'memory = { size = "1G", backing = "memfd", shared = true }\n'
            'nics = [{ type = "vhost-user", port = "p", address = "10.78.0.255/24" }]',
            "guests.a.nics[0].address",
            "network's own address",
        ),
        (
            "[bench.netcompare]\nqueues = [2, 2]\n[guests.a]",
            "bench.netcompare.queues",
            "names a count twice",
        ),
        ("[bench.netcompare]\nseconds = 0.5\n[guests.a]", "bench.netcompare.seconds", ""),
    ],
)
def test_mistakes_are_named_by_key(text: str, key: str, says: str) -> None:
    found = problems(f'name = "n"\n{text}\n')
    assert key in found and says in found, found


def test_guests_on_a_lab_network_or_a_switch_migrate_and_one_on_its_own_tap_does_not() -> None:
    on_network = (
        'name = "n"\n[networks.lan]\n[guests.a]\nmigratable = true\n'
        'nics = [{ type = "tap", network = "lan" }]\n'
        '[[migrations]]\nname = "m"\nguest = "a"\n'
    )
    parse_lab(on_network.encode(), "lab.toml")  # accepted
    own_tap = on_network.replace('network = "lan"', 'ifname = "t0"')
    assert "a second QEMU on this host cannot open it" in problems(own_tap)
    on_ovs = (
        'name = "n"\n[switch]\nkind = "ovs-dpdk"\n[guests.a]\nmigratable = true\n'
        'nics = [{ type = "vhost-user", port = "p0" }]\n'
        '[guests.a.memory]\nsize = "512M"\nbacking = "memfd"\nshared = true\n'
        '[[migrations]]\nname = "m"\nguest = "a"\n'
    )
    parse_lab(on_ovs.encode(), "lab.toml")  # the destination gets an OVS port of its own
    parse_lab(on_ovs.replace("ovs-dpdk", "testpmd").encode(), "lab.toml")


def test_nested_guests_stay_off_the_lab_networks() -> None:
    text = (
        'name = "n"\n[networks.lan]\n[guests.l1]\nnested = true\n'
        '[guests.l1.guests.l2]\nnics = [{ type = "tap", network = "lan" }]\n'
    )
    assert "only top-level guests reach the lab's networks" in problems(text)


def test_a_shipped_style_lab_without_networks_is_untouched(tmp_path: Path) -> None:
    lab = parse_lab(
        b'name = "n"\n[guests.a]\nnics = [{ type = "tap", ifname = "t0" }]\n', "lab.toml"
    )
    assert addresses(lab) == {} and tap_plans(lab, ["a"]) == []
