"""The newc writer: read back by our reader and by busybox cpio."""

from __future__ import annotations

import io
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from kvmlab.guest.cpio import CpioWriter, read_newc


def _archive(with_device: bool = True) -> bytes:
    out = io.BytesIO()
    cpio = CpioWriter(out)
    cpio.add_dir("bin")
    cpio.add_file("bin/hello", b"#!/bin/sh\necho hi\n", 0o755)
    cpio.add_file("etc/odd", b"x" * 5)  # length not a multiple of 4
    cpio.add_file("empty", b"")
    if with_device:
        cpio.add_chardev("dev/console", 5, 1)
    cpio.close()
    return out.getvalue()


def test_round_trip() -> None:
    entries = {e.name: e for e in read_newc(_archive())}
    assert list(entries) == ["bin", "bin/hello", "etc/odd", "empty", "dev/console"]
    assert entries["bin"].is_dir
    assert entries["bin/hello"].data == b"#!/bin/sh\necho hi\n"
    assert stat.S_IMODE(entries["bin/hello"].mode) == 0o755
    assert entries["etc/odd"].data == b"xxxxx"
    assert entries["empty"].data == b""
    assert stat.S_ISCHR(entries["dev/console"].mode) and entries["dev/console"].rdev == (5, 1)


def test_archive_is_4_byte_aligned_and_reproducible() -> None:
    blob = _archive()
    assert len(blob) % 4 == 0
    assert blob == _archive()


@pytest.mark.skipif(shutil.which("busybox") is None, reason="busybox not installed")
def test_busybox_cpio_lists_and_extracts(tmp_path: Path) -> None:
    blob = _archive(with_device=False)
    listing = subprocess.run(
        ["busybox", "cpio", "-t"], input=blob, capture_output=True, check=True, timeout=30
    )
    assert listing.stdout.decode().split() == ["bin", "bin/hello", "etc/odd", "empty"]
    subprocess.run(
        ["busybox", "cpio", "-i", "-d"], input=blob, cwd=tmp_path, check=True, timeout=30
    )
    assert (tmp_path / "bin/hello").read_text() == "#!/bin/sh\necho hi\n"
    assert (tmp_path / "etc/odd").read_bytes() == b"xxxxx"


@pytest.mark.parametrize("name", ["", "/", "a/../b", "TRAILER!!!"])
def test_rejects_bad_names(name: str) -> None:
    with pytest.raises(ValueError):
        CpioWriter(io.BytesIO()).add_file(name, b"")


def test_rejects_duplicates_and_writes_after_close() -> None:
    cpio = CpioWriter(io.BytesIO())
    cpio.add_file("a", b"1")
    with pytest.raises(ValueError, match="duplicate"):
        cpio.add_file("/a", b"2")
    cpio.close()
    with pytest.raises(ValueError, match="closed"):
        cpio.add_file("b", b"")


def test_reader_rejects_garbage() -> None:
    with pytest.raises(ValueError, match="no newc header"):
        read_newc(b"not a cpio archive at all, surely not" * 4)
