"""A libvirt domain name already taken: whose it is decides what kvmlab advises."""

from __future__ import annotations

from pathlib import Path

import libvirt
import pytest

from kvmlab.runtime.libvirt.conn import LibvirtFailure
from kvmlab.runtime.libvirt.machine import LibvirtMachine, owner_of
from kvmlab.runtime.machine import MachineConfig


class Dom:
    def __init__(self, metadata: str | None) -> None:
        self.text = metadata

    def metadata(self, kind: int, uri: str, flags: int) -> str:
        if self.text is None:
            raise libvirt.libvirtError("metadata not found")
        return self.text


def machine(lab: str, guest: str) -> LibvirtMachine:
    config = MachineConfig(
        lab,
        (guest,),
        ["qemu"],
        Path("/nowhere"),
        "tcg",
        "test host",
        1,
        512 << 20,
        boots_image=True,
        children=False,
    )
    return LibvirtMachine(config, "qemu:///system", "<domain/>", "uuid", token="t")


KVMLAB = '<guest xmlns="https://github.com/kvmlab/kvmlab/xmlns/guest/1" lab="a" address="b-c"/>'


def test_the_owner_is_read_from_kvmlab_metadata() -> None:
    assert owner_of(Dom(KVMLAB)) == "a/b-c"
    assert owner_of(Dom(None)) is None
    assert owner_of(Dom("<not-xml")) is None


def test_another_labs_guest_of_the_same_joined_name_is_not_called_a_leftover() -> None:
    with pytest.raises(LibvirtFailure) as caught:
        machine("a-b", "c")._taken(Dom(KVMLAB))
    text = str(caught.value) + " ".join(caught.value.fix)
    assert "kvmlab's guest a/b-c of another lab" in text and "undefine" not in text


def test_a_domain_that_is_not_kvmlabs_gets_the_leftover_commands() -> None:
    with pytest.raises(LibvirtFailure) as caught:
        machine("a-b", "c")._taken(Dom(None))
    assert "kvmlab leaves it alone" in str(caught.value)
    assert any("undefine a-b-c" in line for line in caught.value.fix)
