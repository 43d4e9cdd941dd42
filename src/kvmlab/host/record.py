"""Record the parts of a host the doctor reads into a small tree that stands in for ``/``.

It runs every check through a :class:`RecordingProbe`, which notes each path read,
tested or listed and each command run, then writes just those: trimmed
/proc/cpuinfo (first ``processors`` entries), /proc/cmdline without init's
arguments, the /proc/mounts and /proc/meminfo lines the checks use, empty files
for device nodes and programs, command outputs under ``.commands/`` and the
/dev/kvm answer under ``.ioctl/`` (see :mod:`kvmlab.host.probe`). Usage::

    python -m kvmlab.host.record tests/host/fixtures/pvm-host
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from kvmlab.errors import UsageError
from kvmlab.host.accel import choose_accel
from kvmlab.host.doctor import run_checks
from kvmlab.host.probe import (
    COMMANDS_DIR,
    IOCTL_FILE,
    CommandResult,
    HostProbe,
    KvmAccess,
    PathState,
    command_slug,
)

MOUNT_TYPES = frozenset({"proc", "sysfs", "hugetlbfs", "tracefs", "debugfs"})
MEMINFO_KEYS = ("MemTotal", "HugePages_", "Hugepagesize", "Hugetlb")


class RecordingProbe(HostProbe):
    """A :class:`HostProbe` that remembers which paths were tested, listed and looked up."""

    def __init__(self, root: Path = Path("/")) -> None:
        super().__init__(root)
        self.tested: set[str] = set()
        self.listed: set[str] = set()
        self.programs: set[str] = set()

    def exists(self, host_path: str) -> bool:
        self.tested.add(host_path)
        return super().exists(host_path)

    def is_dir(self, host_path: str) -> bool:
        self.tested.add(host_path)
        return super().is_dir(host_path)

    def state(self, host_path: str) -> PathState:
        self.tested.add(host_path)
        return super().state(host_path)

    def listdir(self, host_path: str) -> list[str]:
        self.listed.add(host_path)
        return super().listdir(host_path)

    def which(self, name: str) -> str | None:
        found = super().which(name)
        if found is not None:
            self.programs.add(found)
        return found

    def reads(self) -> dict[str, str | None]:
        """Every file read, with its text (None: missing)."""
        return dict(self._reads)

    def runs(self) -> dict[tuple[str, ...], CommandResult]:
        """Every command run, with its result."""
        return dict(self._runs)

    def kvm_result(self) -> KvmAccess | None:
        """The /dev/kvm answer, when it was asked."""
        return self._kvm


def trim(host_path: str, text: str, processors: int) -> str:
    """Keep only what the checks need from the big /proc files."""
    if host_path == "/proc/cpuinfo":
        blocks = [b for b in text.split("\n\n") if b.strip()]
        return "\n\n".join(blocks[:processors]) + "\n\n"
    if host_path == "/proc/cmdline":
        return text.split(" -- ", 1)[0].strip() + "\n"
    if host_path == "/proc/mounts":
        lines = [ln for ln in text.splitlines() if ln.split()[2:3] and ln.split()[2] in MOUNT_TYPES]
        return "".join(f"{ln}\n" for ln in lines)
    if host_path == "/proc/meminfo":
        return "".join(f"{ln}\n" for ln in text.splitlines() if ln.startswith(MEMINFO_KEYS))
    return text


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def write_tree(probe: RecordingProbe, dest: Path, processors: int = 2) -> None:
    """Write what ``probe`` saw into ``dest``."""
    for host_path, text in probe.reads().items():
        if text is not None:
            _write(dest / host_path.lstrip("/"), trim(host_path, text, processors))
    for host_path in probe.tested | probe.listed | probe.programs:
        src = probe.path(host_path)
        out = dest / host_path.lstrip("/")
        if src.is_dir():
            out.mkdir(parents=True, exist_ok=True)
        elif src.exists() and not out.exists():
            _write(out, "")
    for host_path in probe.listed:
        for name in probe.listdir(host_path):
            src, out = probe.path(f"{host_path}/{name}"), dest / host_path.lstrip("/") / name
            if src.is_dir():
                out.mkdir(parents=True, exist_ok=True)
            elif not out.exists():
                _write(out, "")
    for argv, result in probe.runs().items():
        if result.found:
            base = dest / COMMANDS_DIR / command_slug(argv)
            _write(base.with_suffix(".txt"), result.output)
            if result.returncode != 0:
                rc = "timeout" if result.returncode is None else str(result.returncode)
                _write(base.with_suffix(".rc"), f"{rc}\n")
    kvm = probe.kvm_result()
    if kvm is not None and kvm.verified:
        _write(dest / IOCTL_FILE, f"error: {kvm.error}\n" if kvm.error else f"{kvm.api_version}\n")
    for d in sorted(dest.rglob("*"), reverse=True):
        if d.is_dir() and not any(d.iterdir()):
            (d / ".keep").write_text("")


def record_tree(dest: Path, root: Path = Path("/"), processors: int = 2) -> RecordingProbe:
    """Run the doctor on ``root`` and record what it read into ``dest`` (must be empty)."""
    if dest.exists() and any(dest.iterdir()):
        raise UsageError(f"{dest} is not empty; record into a new directory")
    probe = RecordingProbe(root)
    run_checks(root, probe=probe)
    choose_accel(root, probe=probe)
    dest.mkdir(parents=True, exist_ok=True)
    write_tree(probe, dest, processors)
    return probe


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kvmlab.host.record", description=__doc__)
    parser.add_argument("dest", type=Path)
    parser.add_argument("--root", type=Path, default=Path("/"))
    parser.add_argument("--processors", type=int, default=2)
    args = parser.parse_args(argv)
    try:
        record_tree(args.dest, args.root, args.processors)
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    print(f"recorded {args.root} into {args.dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
