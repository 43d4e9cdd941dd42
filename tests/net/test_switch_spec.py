"""The lab's [switch] and [bench.pvp]: what a lab file may say, where kvmlab puts the
ports, how the guests' NICs are rendered onto them."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from kvmlab.errors import RenderError, SpecError
from kvmlab.fabric.switch import lab_ports
from kvmlab.render import render_libvirt, render_qemu
from kvmlab.spec import LoadedLab, parse_lab
from tests.conftest import target_for

SHARED = "memory = { size = '1G', backing = 'memfd', shared = true }\n"
TWO_PORTS = (
    "[[guests.vm.nics]]\ntype = 'vhost-user'\nport = 'a'\n"
    "[[guests.vm.nics]]\ntype = 'vhost-user'\nport = 'b'\n"
)
SWITCH = "[switch]\nkind = 'testpmd'\n"


def lab(text: str) -> str:
    return f"name = 't'\n{text}"


def loaded(text: str) -> LoadedLab:
    return LoadedLab(parse_lab(lab(text).encode(), "lab.toml"), Path("/labs/lab.toml"), "0")


CASES = [
    (f"[guests.vm]\n{SHARED}{TWO_PORTS}", "guests.vm.nics[0].port", "no [switch]"),
    (
        f"{SWITCH}[guests.vm]\n{SHARED}nics = [{{ type = 'vhost-user' }}]\n",
        "guests.vm.nics[0]",
        "give either socket",
    ),
    (
        f"{SWITCH}[guests.vm]\n{SHARED}nics = [{{ type = 'vhost-user', port = 'a', "
        "socket = '/tmp/s' }]\n",
        "guests.vm.nics[0]",
        "give either socket",
    ),
    (
        f"{SWITCH}[guests.vm]\n{SHARED}nics = [{{ type = 'vhost-user', port = 'a' }}, "
        "{ type = 'vhost-user', port = 'a' }]\n",
        "guests.vm.nics[1].port",
        "already used",
    ),
    (
        f"{SWITCH}[guests.vm]\n{SHARED}nics = [{{ type = 'vhost-user', port = 'kvmlab-gen' }}]\n",
        "guests.vm.nics[0].port",
        "are kvmlab's",
    ),
    (
        f"{SWITCH}[guests.vm]\n{SHARED}vcpus = 2\nnics = [{{ type = 'vhost-user', port = 'a', "
        "queues = 2 }]\n",
        "guests.vm.nics[0].queues",
        "switch.queues is 1",
    ),
    (
        f"{SWITCH}[guests.vm]\n{SHARED}nics = [{{ type = 'vhost-user', port = 'a', "
        "mode = 'server' }]\n",
        "guests.vm.nics[0].mode",
        "needs QEMU as the socket client",
    ),
    (
        "[switch]\nkind = 'testpmd'\ncores = '0-1'\n[guests.vm]\n",
        "switch.main_core",
        "also in switch.cores",
    ),
    (
        "[switch]\nkind = 'testpmd'\ndescriptors = 1000\n[guests.vm]\n",
        "switch.descriptors",
        "power of two",
    ),
    (
        f"{SWITCH}[guests.vm]\n[bench.pvp]\nguest = 'vm'\n",
        "bench.pvp.guest",
        "needs two vhost-user NICs",
    ),
    (f"{SWITCH}[guests.vm]\n[bench.pvp]\nguest = 'nope'\n", "bench.pvp.guest", "no top-level"),
    (
        f"[guests.vm]\n{SHARED}{TWO_PORTS}[bench.pvp]\nguest = 'vm'\n",
        "bench.pvp.guest",
        "the lab has none",
    ),
    (
        f"{SWITCH}[guests.vm]\n[bench.pvp]\nframe_sizes = [32]\n",
        "bench.pvp.frame_sizes",
        "64..9000",
    ),
]


@pytest.mark.parametrize(("text", "key", "fragment"), CASES)
def test_switch_problems_name_key_and_reason(text: str, key: str, fragment: str) -> None:
    with pytest.raises(SpecError) as info:
        parse_lab(lab(text).encode(), "lab.toml")
    assert any(p.path == key and fragment in p.message for p in info.value.problems), (
        info.value.problems
    )


def test_ports_in_the_order_testpmd_pairs_them() -> None:
    both = parse_lab(
        lab(
            f"{SWITCH}[guests.other]\n{SHARED}nics = [{{ type = 'vhost-user', "
            f"port = 'o' }}]\n[guests.vm]\n{SHARED}{TWO_PORTS}"
        ).encode(),
        "lab.toml",
    )
    # generator <-> the PVP guest's first port, its second <-> sink, then the rest
    assert lab_ports(both) == ["kvmlab-gen", "a", "b", "kvmlab-sink", "o"]
    alone = parse_lab(lab(f"{SWITCH}[guests.vm]\n").encode(), "lab.toml")
    assert lab_ports(alone) == ["kvmlab-gen", "kvmlab-sink"]


@pytest.mark.parametrize(
    ("kind", "mode", "reconnect"), [("testpmd", "client", "1"), ("ovs-dpdk", "server", None)]
)
def test_a_port_is_rendered_with_the_role_its_switch_needs(
    kind: str, mode: str, reconnect: str | None
) -> None:
    spec = loaded(f"[switch]\nkind = '{kind}'\n[guests.vm]\n{SHARED}{TWO_PORTS}")
    target = target_for(spec, ("vm",))
    argv = render_qemu(spec.lab.guests["vm"], target).argv
    chardevs = [a for a in argv if a.startswith("socket,id=chr-net")]
    assert chardevs[0].startswith("socket,id=chr-net0,path=/run/kvmlab/t/.switch/a.sock")
    assert ("server=on" in chardevs[0]) == (mode == "server")
    assert ("reconnect=1" in chardevs[0]) == (reconnect is not None)
    xml = render_libvirt(spec.lab.guests["vm"], target)
    assert f'path="/run/kvmlab/t/.switch/b.sock" mode="{mode}"' in xml


def test_a_socket_path_too_long_for_unix_sockets_is_refused() -> None:
    spec = loaded(f"{SWITCH}[guests.vm]\n{SHARED}{TWO_PORTS}")
    target = replace(target_for(spec, ("vm",)), switch_dir=Path("/run/" + "x" * 120))
    with pytest.raises(RenderError, match="longer than a unix socket path"):
        render_qemu(spec.lab.guests["vm"], target)
