"""An OSError that reaches ``kvmlab``'s entry point is one line, never a traceback.

A read-only run directory or cache (``kvmlab libvirtd start``, ``kvmlab image``) gave an
EROFS traceback, ``KVMLAB_RUN_DIR=/proc/1/root/...`` a PermissionError one (``ps``,
``libvirtd list``), and a full disk under the run directory read "cannot write the
output" although stdout was fine. Now (src/kvmlab/cli/main.py): an OSError naming a file
is ``kvmlab: PATH: STRERROR; what to check[, or set VAR ...]``, exit 3; only stdout's own
failure reads "cannot write the output"."""

from __future__ import annotations

import errno
import io
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import NoReturn

import pytest

from kvmlab.cli.main import main, os_error_line

KVMLAB = str(Path(sys.executable).with_name("kvmlab"))
ROOT = os.geteuid() == 0


def kvmlab(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {
        "KVMLAB_RUN_DIR": str(tmp_path / "run"),
        "KVMLAB_RESULTS": str(tmp_path / "r.sqlite"),
        "KVMLAB_TUNING_STATE": str(tmp_path / "t.json"),
        "XDG_DATA_HOME": str(tmp_path / "data"),
        "KVMLAB_CACHE": str(tmp_path / "cache"),
        "COLUMNS": "200",
    }
    return subprocess.run(
        [KVMLAB, *args],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        env={**os.environ, **base, **env},
    )


def one_line(proc: subprocess.CompletedProcess[str], status: int) -> str:
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode == status, proc.stderr
    (line,) = proc.stderr.splitlines()
    assert line.startswith("kvmlab: ")
    return line.removeprefix("kvmlab: ")


def unmakeable(path: str) -> bool:
    """Whether ``path`` cannot be made a directory here (a probe beside it first)."""
    probe = f"{path}-probe"
    try:
        Path(probe).mkdir()
    except OSError:
        return True
    Path(probe).rmdir()
    return False


@pytest.mark.parametrize("args", [["ps"], ["libvirtd", "list"]])
def test_a_run_dir_below_a_directory_it_may_not_search(args: list[str], tmp_path: Path) -> None:
    try:
        Path("/proc/1/root/kvmlab-x").stat()
    except PermissionError:
        pass
    except OSError:
        pytest.skip("/proc/1/root can be searched here")
    else:
        pytest.skip("/proc/1/root can be searched here")
    line = one_line(kvmlab(tmp_path, *args, KVMLAB_RUN_DIR="/proc/1/root/kvmlab-x"), 2)
    assert line.startswith("run directory /proc/1/root/kvmlab-x cannot be checked or created")
    assert "Permission denied; set KVMLAB_RUN_DIR to a private directory" in line


@pytest.mark.skipif(shutil.which("libvirtd") is None, reason="libvirtd is not installed")
def test_libvirtd_start_in_a_run_dir_that_cannot_be_created(tmp_path: Path) -> None:
    """A sysfs path (EPERM or EROFS, as root too): refused before anything starts."""
    if not unmakeable("/sys/kvmlab-x"):
        pytest.skip("/sys takes new directories here")
    line = one_line(kvmlab(tmp_path, "libvirtd", "start", "zz", KVMLAB_RUN_DIR="/sys/kvmlab-x"), 2)
    assert line.startswith("run directory /sys/kvmlab-x cannot be checked or created: ")
    assert "set KVMLAB_RUN_DIR to a private directory" in line


@pytest.mark.parametrize("cache", ["sysfs", "read-only"])
def test_image_with_a_cache_that_cannot_be_created(cache: str, tmp_path: Path) -> None:
    """The cache is created before anything is built or fetched: only that is tried. A
    sysfs path fails as root too (EPERM, or EROFS); a 0555 parent only for others."""
    if cache == "sysfs":
        where = "/sys/kvmlab-c"
        if not unmakeable(where):
            pytest.skip("/sys takes new directories here")
    else:
        if ROOT:
            pytest.skip("root ignores the mode of a directory")
        (tmp_path / "ro").mkdir(mode=0o555)
        where = str(tmp_path / "ro/cache")
    line = one_line(kvmlab(tmp_path, "image", KVMLAB_CACHE=where), 3)
    assert line.startswith(f"{where}: ")
    assert line.endswith(", or set KVMLAB_CACHE to a place of your own") or line.endswith(
        ", or set KVMLAB_CACHE to a place on a writable one"
    )


def test_image_with_a_file_as_the_caches_parent(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    line = one_line(kvmlab(tmp_path, "image", KVMLAB_CACHE=str(tmp_path / "file/cache")), 2)
    assert line.endswith("set KVMLAB_CACHE to a directory of your own")


def test_an_os_error_naming_a_file_is_one_line() -> None:
    exc = OSError(errno.EROFS, os.strerror(errno.EROFS), "/srv/x/y")
    assert os_error_line(exc) == (
        "/srv/x/y: Read-only file system; its file system is mounted read-only"
    )


def test_an_os_error_in_the_run_dir_names_its_setting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KVMLAB_RUN_DIR", str(tmp_path / "run"))
    exc = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(tmp_path / "run/lab/x"))
    assert os_error_line(exc) == (
        f"{tmp_path}/run/lab/x: No space left on device; its file system is full: free space "
        "there, or set KVMLAB_RUN_DIR to a place on another one"
    )


def test_a_path_with_an_escape_is_escaped() -> None:
    exc = OSError(errno.EACCES, os.strerror(errno.EACCES), "/srv/a\x1b[31m")
    assert os_error_line(exc).startswith("/srv/a\\x1b[31m: Permission denied; ")


def run_ps_failing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, fail: object
) -> tuple[int, str, str]:
    """``kvmlab ps`` in-process with its work replaced by ``fail``: (status, out, err)."""
    import kvmlab.cli.ps_cmd

    monkeypatch.setattr(kvmlab.cli.ps_cmd, "run_ps", fail)
    monkeypatch.setenv("KVMLAB_RUN_DIR", str(tmp_path / "run"))
    monkeypatch.setenv("KVMLAB_TUNING_STATE", str(tmp_path / "t.json"))
    monkeypatch.setattr(sys, "argv", ["kvmlab", "ps"])
    out, err = io.StringIO(), io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.setattr(sys, "stderr", err)
    with pytest.raises(SystemExit) as exited:
        main()
    code = exited.value.code
    return (code if isinstance(code, int) else 0), out.getvalue(), err.getvalue()


def test_a_full_disk_writing_a_file_is_not_the_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Path.write_text on a full disk raises ENOSPC with no file name: the file is still
    named (``libvirtd start`` on a full disk said only "cannot write the output")."""

    def fail(*_args: object) -> None:
        print("some output first")
        Path("/dev/full").write_text("x")  # a real ENOSPC, raised nameless

    status, out, err = run_ps_failing(monkeypatch, tmp_path, fail)
    assert status == 3
    assert out == "some output first\n"
    assert err == (
        "kvmlab: /dev/full: No space left on device; its file system is full: free space there\n"
    )


def test_a_nameless_error_with_an_open_file_names_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = tmp_path / "run" / "lab.json"

    def fail(*_args: object) -> NoReturn:
        state.parent.mkdir()
        with state.open("w") as f:
            assert f
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    status, _out, err = run_ps_failing(monkeypatch, tmp_path, fail)
    assert status == 3
    assert err == (
        f"kvmlab: {state}: No space left on device; its file system is full: free space there, "
        "or set KVMLAB_RUN_DIR to a place on another one\n"
    )


def test_an_eacces_traceback_becomes_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def fail(*_args: object) -> NoReturn:
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), "/var/lib/thing")

    status, _out, err = run_ps_failing(monkeypatch, tmp_path, fail)
    assert status == 3
    assert err == (
        "kvmlab: /var/lib/thing: Permission denied; check the permissions of it and of its "
        "directories\n"
    )


def test_a_nameless_error_nothing_explains_is_still_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def fail(*_args: object) -> NoReturn:
        raise ConnectionRefusedError(errno.ECONNREFUSED, os.strerror(errno.ECONNREFUSED))

    status, _out, err = run_ps_failing(monkeypatch, tmp_path, fail)
    assert status == 3
    (line,) = err.splitlines()
    assert line.startswith("kvmlab: Connection refused (ECONNREFUSED); check ")


def test_stdout_itself_full_is_still_cannot_write_the_output(tmp_path: Path) -> None:
    with Path("/dev/full").open("w") as full:
        proc = subprocess.run(
            [KVMLAB, "labs"],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
            env={**os.environ, "KVMLAB_TUNING_STATE": str(tmp_path / "t.json")},
        )
    assert proc.returncode == 3
    assert proc.stderr == "kvmlab: cannot write the output: No space left on device\n"
