"""``--out`` takes any name the filesystem takes, and refuses the others in one line (issue
39, item 5): a 300-character name, a file where a directory should be, a pipe nobody reads,
the results database itself, a block device (a disk: ``--out /dev/sda`` mistyped) or a
socket; a character device (``/dev/null``) is still written. The installed command runs as
a user would; nothing boots."""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kvmlab.cli import outfile
from kvmlab.errors import UsageError
from kvmlab.results.model import Run, Sample
from kvmlab.results.store import ResultStore

KVMLAB = str(Path(sys.executable).with_name("kvmlab"))
NAME_MAX = os.pathconf("/tmp", "PC_NAME_MAX")


def kvmlab(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KVMLAB_RESULTS": str(db), "KVMLAB_RUN_DIR": str(db.parent / "run")}
    return subprocess.run(
        [KVMLAB, *args],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        env=env,
    )


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "r.sqlite"
    with ResultStore(path) as store:
        run = store.start(Run(0, "lab", "/labs/lab.toml", "d", "quick", "0", time.time()))
        sample = Sample("default", "host", "L0", "native", "cpu", "e", 1.0, "u", True, 0, "c")
        store.add(run, [sample])
        store.finish(run)
    return path


COMMANDS = {
    "report": ("report", "1", "-o", "html", "--out"),
    "export": ("results", "export", "1", "--out"),
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("length", [NAME_MAX - 5, NAME_MAX])
def test_any_name_the_filesystem_takes_is_written(
    command: str, length: int, db: Path, tmp_path: Path
) -> None:
    out = tmp_path / ("x" * (length - 5) + ".html")
    proc = kvmlab(db, *COMMANDS[command], str(out))
    assert proc.returncode == 0, proc.stderr
    assert out.stat().st_size > 0
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_name_too_long_is_one_line(command: str, db: Path, tmp_path: Path) -> None:
    for out in (tmp_path / ("x" * 300 + ".html"), tmp_path / ("y" * 300) / "r.html"):
        proc = kvmlab(db, *COMMANDS[command], str(out))
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.splitlines() == [
            f"kvmlab: --out {out}: a name in it is longer than the filesystem allows; "
            "give a shorter name"
        ]


def test_a_file_where_a_directory_should_be_is_one_line(db: Path, tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    out = tmp_path / "file" / "r.csv"
    proc = kvmlab(db, "results", "export", "1", "--out", str(out))
    assert proc.returncode == 2
    assert proc.stderr == f"kvmlab: --out {out}: a part of it is a file, not a directory\n"


def test_a_pipe_nobody_reads_is_one_line_not_a_hang(db: Path, tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    proc = kvmlab(db, "results", "export", "1", "--out", str(fifo))
    assert proc.returncode == 3
    assert proc.stderr == (
        f"kvmlab: cannot write --out {fifo}: nothing is reading that pipe; start its reader first\n"
    )


@pytest.mark.parametrize("end", ["", "-wal", "-shm", "-journal"])
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_the_results_database_is_never_written_over(
    command: str, end: str, db: Path, tmp_path: Path
) -> None:
    before = db.read_bytes()
    out = db.with_name(db.name + end)
    proc = kvmlab(db, *COMMANDS[command], str(out))
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr == (
        f"kvmlab: --out {out} is the results database kvmlab reads; give another file name\n"
    )
    assert db.read_bytes() == before


UNUSED_LOOP = os.makedev(7, 200)
"""A loop device minor nobody uses here (checked): a node of it in tmp_path is a block
device that leads to no disk. Opening it would make the kernel create ``loop200`` (seen in
``/sys/dev/block``): that it stays absent shows the node was not even opened."""
UNUSED_SYS = Path(f"/sys/dev/block/{os.major(UNUSED_LOOP)}:{os.minor(UNUSED_LOOP)}")
REFUSED_DEVICE = (
    "kvmlab writes to a file, a pipe or a character device only, never onto a disk: "
    "give a file name"
)


def block_device(path: Path) -> Path:
    """A block device node at ``path`` (root only) for :data:`UNUSED_LOOP`."""
    if os.geteuid() != 0:
        pytest.skip("making a device node needs root")
    major, minor = os.major(UNUSED_LOOP), os.minor(UNUSED_LOOP)
    used = UNUSED_SYS.exists() or any(
        stat.S_ISBLK(e.stat(follow_symlinks=False).st_mode)
        and e.stat(follow_symlinks=False).st_rdev == UNUSED_LOOP
        for e in os.scandir("/dev")
    )
    if used:
        pytest.skip(f"block device {major}:{minor} exists on this host")
    os.mknod(path, stat.S_IFBLK | 0o600, UNUSED_LOOP)
    return path


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_block_device_is_never_written(command: str, db: Path, tmp_path: Path) -> None:
    """``--out /dev/sda`` mistyped must not destroy a disk: refused before anything opens it."""
    disk = block_device(tmp_path / "disk")
    before = disk.lstat()
    proc = kvmlab(db, *COMMANDS[command], str(disk))
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr == f"kvmlab: --out {disk} is a block device (a disk); {REFUSED_DEVICE}\n"
    after = disk.lstat()
    assert (after.st_ino, after.st_mode, after.st_rdev, after.st_mtime_ns, after.st_ctime_ns) == (
        before.st_ino,
        before.st_mode,
        before.st_rdev,
        before.st_mtime_ns,
        before.st_ctime_ns,
    ), "the node was neither replaced nor written"
    assert not UNUSED_SYS.exists(), "the node was opened"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_socket_is_refused(command: str, db: Path, tmp_path: Path) -> None:
    place = tmp_path / "s"
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(place))
        proc = kvmlab(db, *COMMANDS[command], str(place))
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr == f"kvmlab: --out {place} is a socket; {REFUSED_DEVICE}\n"


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_character_device_is_still_written(command: str, db: Path) -> None:
    proc = kvmlab(db, *COMMANDS[command], "/dev/null")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == "wrote /dev/null\n"


def test_what_is_opened_in_place_is_checked_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """A disk swapped in between ``check_out`` and the open is refused, not written: here
    ``/dev/null`` opened, as if it had become a block device meanwhile."""
    monkeypatch.setattr(outfile, "check_out", lambda path, flag="--out": None)
    real = os.fstat

    def as_disk(fd: int) -> os.stat_result:
        info = list(real(fd))
        info[0] = stat.S_IFBLK | 0o600
        return os.stat_result(info)

    monkeypatch.setattr(os, "fstat", as_disk)
    with pytest.raises(UsageError) as caught:
        outfile.write_out(Path("/dev/null"), "<html>")
    assert caught.value.lines() == [f"--out /dev/null is a block device (a disk); {REFUSED_DEVICE}"]
