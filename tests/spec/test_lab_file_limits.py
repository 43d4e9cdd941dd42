"""Lab files are regular files of at most 1 MiB, checked before they are read."""

from __future__ import annotations

import os
import socket
import threading
from pathlib import Path

import pytest

from kvmlab.errors import SpecError
from kvmlab.spec import load_lab
from kvmlab.spec.load import MAX_LAB_BYTES

GOOD = 'name = "x"\n[guests.vm]\n'


def problem(path: Path | str) -> str:
    with pytest.raises(SpecError) as info:
        load_lab(path)
    (only,) = info.value.lines()
    return only


def test_a_device_is_refused_before_reading() -> None:
    """Like /dev/zero (which the old loader read until the OOM killer came), tested with
    /dev/null so that a regression fails instead of eating memory."""
    assert problem("/dev/null") == (
        "/dev/null: is a character device, not a lab file; a lab file is a regular TOML file"
    )


def test_fifo_does_not_hang(tmp_path: Path) -> None:
    fifo = tmp_path / "lab.toml"
    os.mkfifo(fifo)
    done: list[str] = []
    reader = threading.Thread(target=lambda: done.append(problem(fifo)), daemon=True)
    reader.start()
    reader.join(timeout=5)
    assert done == [f"{fifo}: is a named pipe, not a lab file; a lab file is a regular TOML file"]


def test_socket_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "lab.sock"
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(path))
        message = problem(path)
    assert message == f"{path}: is a socket, not a lab file; a lab file is a regular TOML file"


def test_directory_is_refused(tmp_path: Path) -> None:
    assert problem(tmp_path) == f"{tmp_path}: is a directory, not a lab file"


def test_file_over_the_limit_is_refused_before_reading(tmp_path: Path) -> None:
    big = tmp_path / "big.toml"
    with big.open("wb") as f:
        f.truncate(8 << 20)  # sparse
    assert problem(big) == (
        f"{big}: is larger than 1 MiB ({8 << 20} bytes); a lab file is at most 1 MiB"
    )


def test_file_at_the_limit_is_read(tmp_path: Path) -> None:
    lab = tmp_path / "lab.toml"
    text = GOOD + "#" * (MAX_LAB_BYTES - len(GOOD) - 1) + "\n"
    lab.write_text(text)
    assert lab.stat().st_size == MAX_LAB_BYTES
    assert load_lab(lab).lab.name == "x"


def test_symlink_to_a_lab_is_fine(tmp_path: Path) -> None:
    (tmp_path / "real.toml").write_text(GOOD)
    (tmp_path / "link.toml").symlink_to(tmp_path / "real.toml")
    assert load_lab(tmp_path / "link.toml").lab.name == "x"


def test_unreadable_file_is_one_line(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root reads everything")
    lab = tmp_path / "lab.toml"
    lab.write_text(GOOD)
    lab.chmod(0)
    assert problem(lab) == f"{lab}: Permission denied"
