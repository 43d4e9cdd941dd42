"""Network namespaces: kvmlab's names only, created once, deleted with every device in them."""

from __future__ import annotations

import os
import subprocess

import pytest

from kvmlab.errors import StateError
from kvmlab.fabric import namespaces


def test_names_are_kvmlabs() -> None:
    assert namespaces.ns_name("lab", "switch") == "kvmlab-lab-switch"
    assert namespaces.exec_argv("kvmlab-a-b", ["x", "-y"]) == [
        "nsenter",
        "--net=/run/netns/kvmlab-a-b",
        "--",
        "x",
        "-y",
    ]


@pytest.mark.parametrize("bad", ["eth0", "../../etc", "kvmlab-A", "kvmlab-a/b", "kvmlab-", ""])
def test_a_name_kvmlab_never_gives_is_refused(bad: str) -> None:
    with pytest.raises(StateError):
        namespaces.exists(bad)
    with pytest.raises(StateError):
        namespaces.delete(bad)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root")
def test_create_refuses_an_existing_one_and_delete_takes_its_devices() -> None:
    name = f"kvmlab-t{os.getpid()}-ns"
    namespaces.create(name)
    try:
        with pytest.raises(StateError, match="not on kvmlab's record"):
            namespaces.create(name)
        namespaces.ip("tuntap", "add", "kvt0", "mode", "tap", netns=name)  # persistent
        assert "kvt0" in namespaces.ip("link", netns=name)
        assert "UP" in namespaces.ip("link", "show", "lo", netns=name)
    finally:
        namespaces.delete(name)
    assert not namespaces.exists(name)
    namespaces.delete(name)  # gone already is fine
    assert "kvt0" not in subprocess.run(["ip", "link"], capture_output=True, text=True).stdout
