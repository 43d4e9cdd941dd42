"""What a lab takes from the host that kvmlab does not make is refused before anything
starts, in one line with the fix: a switch socket of the user's that nothing serves, and
guest RAM on huge pages the host has too few of (a sysfs laid out by the test)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from kvmlab.errors import HostError
from kvmlab.runtime.host_needs import check_external_sockets, check_guest_hugepages
from kvmlab.spec.lab import Lab


def lab(nic: dict[str, object] | None = None, memory: dict[str, object] | None = None) -> Lab:
    guest: dict[str, object] = {"memory": memory or {"size": "3G"}}
    if nic is not None:
        guest["nics"] = [nic]
    return Lab.model_validate({"name": "x", "guests": {"vm": guest}})


def test_a_switch_socket_nothing_serves_is_refused(short_tmp: Path) -> None:
    path = short_tmp / "vhu.sock"
    spec = lab({"type": "vhost-user", "socket": "vhu.sock"})
    with pytest.raises(HostError, match=r"guests\.vm\.nics\[0\]\.socket: nothing serves") as got:
        check_external_sockets("x.toml", short_tmp, spec, ["vm"])
    assert f"iface={path}" in str(got.value) and "\n" not in str(got.value)
    path.write_text("")  # a file is not a socket
    with pytest.raises(HostError):
        check_external_sockets("x.toml", short_tmp, spec, ["vm"])
    path.unlink()
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    try:
        check_external_sockets("x.toml", short_tmp, spec, ["vm"])  # relative to the lab
        server_mode = lab({"type": "vhost-user", "socket": "/nonexistent", "mode": "server"})
        check_external_sockets("x.toml", short_tmp, server_mode, ["vm"])  # QEMU makes it
    finally:
        server.close()


def pool(root: Path, kb: int, total: int, free: int, resv: int = 0) -> None:
    where = root / f"hugepages-{kb}kB"
    where.mkdir(parents=True)
    for name, value in (("nr_hugepages", total), ("free_hugepages", free)):
        (where / name).write_text(f"{value}\n")
    (where / "resv_hugepages").write_text(f"{resv}\n")


def test_too_few_free_huge_pages_are_refused_with_the_command(tmp_path: Path) -> None:
    pool(tmp_path, 1048576, total=2, free=2, resv=1)
    pool(tmp_path, 2048, total=0, free=0)
    gib = lab(memory={"size": "3G", "backing": "hugepages", "hugepage_size": "1G"})
    with pytest.raises(HostError, match=r"needs 3 free huge pages of 1G \(1 free\)") as got:
        check_guest_hugepages("x.toml", gib, ["vm"], tmp_path)
    assert f"echo 4 > {tmp_path}/hugepages-1048576kB/nr_hugepages" in str(got.value)
    (tmp_path / "hugepages-1048576kB" / "free_hugepages").write_text("4\n")
    check_guest_hugepages("x.toml", gib, ["vm"], tmp_path)
    check_guest_hugepages("x.toml", lab(), ["vm"], tmp_path)  # anonymous RAM: nothing
    mib = lab(memory={"size": "3G", "backing": "hugepages"})
    with pytest.raises(HostError, match="needs 1536 free huge pages of 2M"):
        check_guest_hugepages("x.toml", mib, ["vm"], tmp_path)


def test_a_page_size_the_kernel_lacks_is_said(tmp_path: Path) -> None:
    gib = lab(memory={"size": "2G", "backing": "hugepages", "hugepage_size": "1G"})
    with pytest.raises(HostError, match="offers none of that size"):
        check_guest_hugepages("x.toml", gib, ["vm"], tmp_path)
