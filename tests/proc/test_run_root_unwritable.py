"""A run root kvmlab cannot check or create is one :class:`StateError` naming
KVMLAB_RUN_DIR and what fixes it, never an OSError traceback.

``KVMLAB_RUN_DIR=/proc/1/root/x kvmlab ps`` gave a PermissionError traceback; a read-only
run root, an EROFS one; a full disk, "cannot write the output". Root ignores file modes,
so the read-only cases use a sysfs path, a file as a parent, and (not root) a 0555
directory; ENOSPC is monkeypatched."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import NoReturn

import pytest

from kvmlab.errors import StateError
from kvmlab.proc.confined import MARKER, checked_run_root, create_owned, write_private

ROOT = os.geteuid() == 0


def refused(monkeypatch: pytest.MonkeyPatch, run_dir: str, create: bool = True) -> str:
    monkeypatch.setenv("KVMLAB_RUN_DIR", run_dir)
    with pytest.raises(StateError) as caught:
        checked_run_root(create=create)
    (line,) = caught.value.lines()
    assert "KVMLAB_RUN_DIR" in line
    return line


def test_a_run_root_below_a_directory_it_may_not_search(monkeypatch: pytest.MonkeyPatch) -> None:
    try:
        Path("/proc/1/root/kvmlab-x").stat()
    except PermissionError:
        pass
    except OSError:
        pytest.skip("/proc/1/root can be searched here (root with CAP_SYS_PTRACE)")
    else:
        pytest.skip("/proc/1/root can be searched here (root with CAP_SYS_PTRACE)")
    for create in (False, True):
        line = refused(monkeypatch, "/proc/1/root/kvmlab-x", create)
        assert line.startswith("run directory /proc/1/root/kvmlab-x cannot be checked or created")
        assert ": Permission denied; set KVMLAB_RUN_DIR to a private directory" in line


def test_a_run_root_in_sysfs_cannot_be_created(monkeypatch: pytest.MonkeyPatch) -> None:
    line = refused(monkeypatch, "/sys/kvmlab-x")
    assert line.startswith("run directory /sys/kvmlab-x cannot be checked or created: ")
    assert "set KVMLAB_RUN_DIR to a private directory" in line  # EPERM, or EROFS
    assert not Path("/sys/kvmlab-x").exists()


def test_a_file_as_a_parent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "file").write_text("")
    line = refused(monkeypatch, str(tmp_path / "file/run"))
    assert line == (
        f"run directory {tmp_path}/file/run: {tmp_path}/file is not a directory; set "
        "KVMLAB_RUN_DIR to a private directory of your own"
    )


@pytest.mark.skipif(ROOT, reason="root ignores the mode of a directory")
def test_a_read_only_parent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    parent = tmp_path / "ro"
    parent.mkdir(mode=0o555)
    try:
        line = refused(monkeypatch, str(parent / "run"))
    finally:
        parent.chmod(0o755)
    assert f"run directory {parent}/run cannot be checked or created: Permission denied" in line


def full(*_args: object, **_kw: object) -> NoReturn:
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))  # as a write fails: no file name


def test_a_full_disk_while_marking_the_run_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(Path, "write_text", full)
    line = refused(monkeypatch, str(tmp_path / "run"))
    assert line == (
        f"run directory {tmp_path}/run cannot be checked or created ({tmp_path}/run/{MARKER}): "
        "No space left on device; its file system is full: free space there, or set "
        "KVMLAB_RUN_DIR to a private directory on another one"
    )


def test_a_full_disk_while_marking_a_directory_names_the_marker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KVMLAB_RUN_DIR", str(tmp_path / "run"))
    checked_run_root()
    monkeypatch.setattr(Path, "write_text", full)
    with pytest.raises(OSError) as caught:
        create_owned(tmp_path / "run/lab", "lab x")
    assert caught.value.errno == errno.ENOSPC
    assert caught.value.filename == str(tmp_path / "run/lab" / MARKER)


def test_a_full_disk_in_write_private_names_the_file_and_leaves_no_temporary_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(OSError) as caught:
        write_private(tmp_path / "guest.json", "{}")
    assert caught.value.errno == errno.ENOSPC
    assert caught.value.filename == str(tmp_path / ".guest.json.tmp")
    assert list(tmp_path.iterdir()) == []
