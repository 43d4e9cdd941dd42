"""``libvirt_uri`` on a guest: one lab's guests on several libvirt daemons."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvmlab.cli.backend_opts import BackendOptions, choose_backend
from kvmlab.errors import SpecError, UsageError
from kvmlab.runtime.libvirt.backend import LibvirtBackend
from kvmlab.spec import load_lab

TWO = """
name = "two"
[guests.a]
[guests.b]
libvirt_uri = "URI"
"""


def lab(tmp_path: Path, text: str) -> Path:
    (tmp_path / "two.toml").write_text(text)
    return tmp_path / "two.toml"


def test_each_guest_runs_on_its_daemon(tmp_path: Path) -> None:
    loaded = load_lab(lab(tmp_path, TWO.replace("URI", "qemu+tcp://127.0.0.1:16590/system")))
    backend = choose_backend(loaded, BackendOptions("libvirt", "qemu:///system", None))
    assert isinstance(backend, LibvirtBackend)
    guests = loaded.lab.guests
    assert backend.uri_of(guests["a"]) == "qemu:///system"
    assert backend.uri_of(guests["b"]) == "qemu+tcp://127.0.0.1:16590/system"
    assert backend.on_this_host(guests["b"])  # loopback is this host


@pytest.mark.parametrize("uri", ["qemu:///session", "", "/etc", "qemu+ssh://-oProxy/system"])
def test_a_bad_uri_names_the_guest_key(tmp_path: Path, uri: str) -> None:
    with pytest.raises(SpecError) as caught:
        load_lab(lab(tmp_path, TWO.replace("URI", uri)))
    assert "guests.b.libvirt_uri" in str(caught.value)


def test_a_guest_inside_a_guest_hypervisor_names_no_daemon(tmp_path: Path) -> None:
    text = (
        'name = "two"\n[guests.l1]\nnested = true\n[guests.l1.guests.l2]\n'
        'libvirt_uri = "qemu:///system"\n'
    )
    with pytest.raises(SpecError) as caught:
        load_lab(lab(tmp_path, text))
    assert "guests.l1.guests.l2.libvirt_uri" in str(caught.value)


def test_the_qemu_backend_refuses_a_guest_that_names_a_daemon(tmp_path: Path) -> None:
    loaded = load_lab(lab(tmp_path, TWO.replace("URI", "qemu:///system")))
    with pytest.raises(UsageError, match=r"guests\.b\.libvirt_uri .* qemu backend"):
        choose_backend(loaded, BackendOptions(None, None, None))


def test_qemu_as_root_is_the_libvirt_backends_and_off_by_default(tmp_path: Path) -> None:
    loaded = load_lab(lab(tmp_path, 'name = "two"\n[guests.a]\n'))
    with pytest.raises(UsageError, match="--qemu-as-root need --backend libvirt"):
        choose_backend(loaded, BackendOptions(None, None, None, True))
    backend = choose_backend(loaded, BackendOptions("libvirt", None, None))
    assert isinstance(backend, LibvirtBackend) and not backend.allow_root
    asked = choose_backend(loaded, BackendOptions("libvirt", None, None, True))
    assert isinstance(asked, LibvirtBackend) and asked.allow_root
