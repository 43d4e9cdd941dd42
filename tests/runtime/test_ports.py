"""Forwarded host ports are checked free before a guest starts, and the holder is named."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from kvmlab.errors import HostError
from kvmlab.runtime.forwarded_ports import check_free, holders
from kvmlab.spec import Guest, load_lab


def lab_forwarding(tmp_path: Path, port: int) -> Path:
    lab = tmp_path / "fwd.toml"
    lab.write_text(
        f'name = "fwd"\n[guests.vm]\n[[guests.vm.nics]]\ntype = "user"\n'
        f"forwards = [{{ host_port = {port}, guest_port = 22 }}]\n"
    )
    return lab


def test_a_busy_port_is_refused_naming_its_holder(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        loaded = load_lab(lab_forwarding(tmp_path, port))
        guests: list[tuple[tuple[str, ...], Guest]] = [
            ((n,), g) for n, g in loaded.lab.guests.items()
        ]
        with pytest.raises(HostError) as caught:
            check_free(str(loaded.path), guests)
        line = caught.value.lines()[0]
        assert f"guests.vm.nics[0].forwards[0]: host port 127.0.0.1:{port}/tcp" in line
        assert f"pid {os.getpid()}" in line
        assert [h.split()[1] for h in holders("tcp", port)] == [str(os.getpid())]

    check_free(str(loaded.path), guests)  # free again: no error
