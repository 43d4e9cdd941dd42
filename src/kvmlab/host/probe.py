"""Read-only access to a host, live or recorded.

Every check reads the host through a :class:`HostProbe`. Paths are host paths
(``/proc/cpuinfo``) resolved under ``root``. When ``root`` is ``/`` the probe is
*live*: it runs commands and opens ``/dev/kvm``. Under any other root it reads a
*recorded tree* and never runs anything:

- ``<root>/.commands/<slug>.txt`` is the combined output of a command, where
  ``slug = command_slug(argv)``; ``<slug>.rc`` holds its exit code (absent: 0,
  ``timeout``: timed out). No ``.txt`` file means the command is not installed.
- ``<root>/.ioctl/KVM_GET_API_VERSION.txt`` holds the API version ``/dev/kvm``
  answered (``12``) or ``error: <message>`` when opening it failed.
- Names starting with ``.`` are ignored by :meth:`HostProbe.listdir`, so a
  ``.keep`` file can keep an otherwise empty directory in git.

Every file is read like user input (:func:`read_bounded`): only a regular file is opened
(``/proc`` and ``/sys`` pseudo-files are regular files that report size 0), without
blocking, and at most :data:`MAX_READ` bytes of it. A FIFO, a device, a socket or a file
larger than that is *unreadable*, with the reason (:meth:`HostProbe.unreadable`), never a
hang or a read without end (``proc/cpuinfo -> /dev/zero`` in a tree given to ``--root``).
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import stat
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from kvmlab.bounded import read_at_most
from kvmlab.errors import printable

COMMANDS_DIR = ".commands"
IOCTL_FILE = ".ioctl/KVM_GET_API_VERSION.txt"
KVM_GET_API_VERSION = 0xAE00
KVM_API_VERSION = 12
COMMAND_TIMEOUT = 10.0
# Where programs live on Debian; searched besides $PATH (which often lacks sbin).
BIN_DIRS = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")

MAX_READ = 4 << 20
"""The most the doctor reads of one file. /proc and /sys pseudo-files report size 0, so the
bound is what is read, not the size a file claims; a file holding more is unreadable (the
largest it reads, /proc/cpuinfo, is about 1.5 KiB a CPU)."""
_MISSING = (errno.ENOENT, errno.ENOTDIR)

PathState = Literal["ok", "missing", "denied"]


class Unreadable(Exception):
    """A file exists but the doctor does not read it; ``why`` says what it is instead."""

    def __init__(self, why: str) -> None:
        self.why = why
        super().__init__(why)


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISDIR(mode):
        return "a directory"
    return "not a file"


def read_bounded(path: Path, limit: int = MAX_READ) -> str:
    """The text of regular file ``path`` (a final link followed: /proc holds them), read
    without blocking and never past ``limit`` bytes. FileNotFoundError when it (or a
    directory on the way) is missing; :class:`Unreadable` with the reason when it is a
    FIFO, a device, a socket, a directory, larger than ``limit``, or refused. A device is
    never opened: opening one can act."""
    try:
        first = path.stat()
    except OSError as exc:
        if exc.errno in _MISSING:
            raise FileNotFoundError(exc.errno, exc.strerror, str(path)) from None
        raise Unreadable(printable(exc.strerror or str(exc))) from None
    if not stat.S_ISREG(first.st_mode):
        raise Unreadable(f"{_kind(first.st_mode)}, not a regular file")
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno in _MISSING:
            raise FileNotFoundError(exc.errno, exc.strerror, str(path)) from None
        raise Unreadable(printable(exc.strerror or str(exc))) from None
    try:
        now = os.fstat(fd)
        if not stat.S_ISREG(now.st_mode):  # swapped since the stat
            raise Unreadable(f"{_kind(now.st_mode)}, not a regular file")
        data = read_at_most(fd, limit)
    except OSError as exc:
        raise Unreadable(printable(exc.strerror or str(exc))) from None
    finally:
        os.close(fd)
    if data is None:
        raise Unreadable(f"larger than {limit >> 20} MiB")
    return data.decode(errors="replace")


@dataclass(frozen=True)
class CommandResult:
    """What running a command gave. ``returncode`` is None when it timed out or could not start."""

    argv: tuple[str, ...]
    found: bool
    returncode: int | None
    output: str

    @property
    def ok(self) -> bool:
        return self.found and self.returncode == 0

    @property
    def first_line(self) -> str:
        return next((ln.strip() for ln in self.output.splitlines() if ln.strip()), "")

    @property
    def command(self) -> str:
        return " ".join(self.argv)


@dataclass(frozen=True)
class KvmAccess:
    """The outcome of opening ``/dev/kvm`` O_RDWR and asking KVM_GET_API_VERSION."""

    verified: bool
    api_version: int | None
    error: str | None

    @property
    def usable(self) -> bool:
        return self.verified and self.error is None and self.api_version == KVM_API_VERSION


def command_slug(argv: Sequence[str]) -> str:
    """File name stem for a recorded command: argv joined by ``_``, odd characters as ``_``."""
    return re.sub(r"[^A-Za-z0-9.+=-]", "_", "_".join(argv))


class HostProbe:
    """Reads files, lists directories and runs commands on a host; results are cached."""

    def __init__(self, root: Path = Path("/")) -> None:
        self.root = Path(root)
        self.live = self.root.resolve() == Path("/")
        self._reads: dict[str, str | None] = {}
        self._unreadable: dict[str, str] = {}
        self.met_unreadable: dict[str, str] = {}
        """Files found unreadable by :meth:`read` since the caller last cleared it (the
        doctor does per check, and names them in the check's finding)."""
        self._runs: dict[tuple[str, ...], CommandResult] = {}
        self._kvm: KvmAccess | None = None

    def path(self, host_path: str) -> Path:
        """The real path of ``host_path`` under this probe's root."""
        return self.root / host_path.lstrip("/")

    def read(self, host_path: str) -> str | None:
        """The file's text, or None when it is missing or unreadable
        (:meth:`unreadable` says why)."""
        if host_path not in self._reads:
            text: str | None = None
            try:
                text = read_bounded(self.path(host_path))
            except FileNotFoundError:
                pass
            except Unreadable as exc:
                self._unreadable[host_path] = exc.why
            self._reads[host_path] = text
        if host_path in self._unreadable:
            self.met_unreadable[host_path] = self._unreadable[host_path]
        return self._reads[host_path]

    def unreadable(self, host_path: str) -> str | None:
        """Why :meth:`read` found ``host_path`` unreadable (``a FIFO, not a regular
        file``), or None when it read it or found it missing."""
        return self._unreadable.get(host_path)

    def cannot_read(self, host_path: str) -> str:
        """Why :meth:`read` gave None, in words: ``/proc/cpuinfo is missing`` or
        ``/proc/cpuinfo is unreadable (a FIFO, not a regular file)``."""
        why = self.unreadable(host_path)
        return f"{host_path} is missing" if why is None else f"{host_path} is unreadable ({why})"

    def read_value(self, host_path: str) -> str | None:
        """The file's text stripped (for one-value files such as module parameters)."""
        text = self.read(host_path)
        return None if text is None else text.strip()

    def exists(self, host_path: str) -> bool:
        return self.path(host_path).exists()

    def is_dir(self, host_path: str) -> bool:
        return self.path(host_path).is_dir()

    def state(self, host_path: str) -> PathState:
        """Whether a path exists and this process may read it."""
        p = self.path(host_path)
        if not p.exists():
            return "missing"
        mode = os.R_OK | (os.X_OK if p.is_dir() else 0)
        return "ok" if os.access(p, mode) else "denied"

    def listdir(self, host_path: str) -> list[str]:
        """Sorted entry names (hidden ones left out); empty when missing or unreadable."""
        try:
            names = [p.name for p in self.path(host_path).iterdir()]
        except OSError:
            return []
        return sorted(n for n in names if not n.startswith("."))

    def which(self, name: str) -> str | None:
        """The host path of program ``name`` (searched in $PATH and the sbin dirs), or None."""
        return self._find(name)

    def _find(self, name: str) -> str | None:
        if "/" in name:
            return name if self._executable(name) else None
        if self.live:
            dirs = [*os.environ.get("PATH", "").split(os.pathsep), *BIN_DIRS]
            return shutil.which(name, path=os.pathsep.join(d for d in dirs if d))
        return next((f"{d}/{name}" for d in BIN_DIRS if self.path(f"{d}/{name}").is_file()), None)

    def _executable(self, host_path: str) -> bool:
        p = self.path(host_path)
        return p.is_file() and (not self.live or os.access(p, os.X_OK))

    def run(self, argv: Sequence[str], timeout: float = COMMAND_TIMEOUT) -> CommandResult:
        """Run a command (live) or look up its recorded output; never raises for a missing one."""
        key = tuple(argv)
        if key not in self._runs:
            self._runs[key] = self._run_live(key, timeout) if self.live else self._run_recorded(key)
        return self._runs[key]

    def _run_live(self, argv: tuple[str, ...], timeout: float) -> CommandResult:
        exe = self._find(argv[0])
        if exe is None:
            return CommandResult(argv, False, None, "")
        env = {**os.environ, "LC_ALL": "C", "LANG": "C"}
        try:
            proc = subprocess.run(
                [exe, *argv[1:]],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                env=env,
                timeout=timeout,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return CommandResult(argv, True, None, f"timed out after {timeout:g} s")
        except OSError as exc:
            return CommandResult(argv, True, None, str(exc))
        return CommandResult(argv, True, proc.returncode, proc.stdout.decode(errors="replace"))

    def _run_recorded(self, argv: tuple[str, ...]) -> CommandResult:
        base = self.root / COMMANDS_DIR / command_slug(argv)
        record = f"{COMMANDS_DIR}/{base.name}"
        try:
            output = read_bounded(base.with_suffix(".txt"))
        except FileNotFoundError:
            return CommandResult(argv, False, None, "")
        except Unreadable as exc:
            return CommandResult(argv, True, None, f"unreadable record {record}.txt: {exc.why}")
        try:
            rc_text = read_bounded(base.with_suffix(".rc")).strip()
        except FileNotFoundError:
            rc_text = "0"
        except Unreadable as exc:
            return CommandResult(argv, True, None, f"unreadable record {record}.rc: {exc.why}")
        returncode = int(rc_text) if rc_text.lstrip("-").isdigit() else None
        return CommandResult(argv, True, returncode, output)

    def kvm_access(self) -> KvmAccess:
        """Open /dev/kvm and ask its API version (live), or read the recorded answer."""
        if self._kvm is None:
            self._kvm = self._kvm_live() if self.live else self._kvm_recorded()
        return self._kvm

    def _kvm_live(self) -> KvmAccess:
        import fcntl

        try:
            fd = os.open("/dev/kvm", os.O_RDWR | os.O_CLOEXEC)
        except OSError as exc:
            return KvmAccess(True, None, exc.strerror or str(exc))
        try:
            return KvmAccess(True, fcntl.ioctl(fd, KVM_GET_API_VERSION), None)
        except OSError as exc:
            return KvmAccess(True, None, f"KVM_GET_API_VERSION: {exc.strerror or exc}")
        finally:
            os.close(fd)

    def _kvm_recorded(self) -> KvmAccess:
        try:
            text = read_bounded(self.root / IOCTL_FILE).strip()
        except FileNotFoundError:
            return KvmAccess(False, None, None)
        except Unreadable as exc:
            return KvmAccess(True, None, f"unreadable record {IOCTL_FILE}: {exc.why}")
        if text.startswith("error:"):
            return KvmAccess(True, None, text.removeprefix("error:").strip())
        if not text.isdigit():
            shown = text if len(text) <= 40 else text[:37] + "..."
            return KvmAccess(True, None, f"unreadable record {IOCTL_FILE}: {shown!r}")
        return KvmAccess(True, int(text), None)
