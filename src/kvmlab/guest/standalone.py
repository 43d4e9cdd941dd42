"""What the self-contained image (``share = "none"``) carries instead of the host's root.

A guest that mounts a 9p share cannot be live-migrated (QEMU registers a migration blocker
when the guest attaches the export), nor can one with virtio-fs (vhost-user-fs has no
migration support in QEMU 7.2). So guests with ``migratable = true`` boot an initramfs that
holds everything they run: busybox, the host's ``qemu-ga`` with the shared libraries it
links (found with ``ldd``), and ``kvmlab-dirty`` (``dirty.c``, compiled static here): the
dirtying workload and memory check of ``kvmlab migrate``.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from kvmlab.errors import ToolMissing
from kvmlab.guest.errors import ImageError

QEMU_GA = Path("/usr/sbin/qemu-ga")
DIRTY_BIN = "bin/kvmlab-dirty"
ECHO_BIN = "bin/kvmlab-echo"
LIB_DIR = "lib/x86_64-linux-gnu"
_LDD_LINE = re.compile(r"^\s*(?:(\S+) => )?(/\S+) \(0x[0-9a-f]+\)\s*$")


@dataclass(frozen=True)
class ToolFile:
    """One file of the initramfs: where it goes, its bytes, its mode."""

    path: str
    data: bytes
    mode: int = 0o755


def dirty_source() -> str:
    """The text of dirty.c as shipped in this package."""
    return resources.files("kvmlab.guest").joinpath("dirty.c").read_text()


def inputs() -> dict[str, str]:
    """What the tools are built from, for the image cache key."""
    if not QEMU_GA.is_file():
        raise ToolMissing("qemu-ga", "apt-get install qemu-guest-agent")
    return {
        "qemu-ga": hashlib.sha256(QEMU_GA.read_bytes()).hexdigest(),
        "dirty.c": hashlib.sha256(dirty_source().encode()).hexdigest(),
    }


def parse_ldd(text: str) -> list[tuple[str, Path]]:
    """``ldd`` output as (the name the loader looks for, the file on this host)."""
    found = []
    for line in text.splitlines():
        match = _LDD_LINE.match(line)
        if match is None:
            continue
        name, path = match.group(1), Path(match.group(2))
        found.append((name or path.name, path))
    return found


def compile_dirty(workdir: Path) -> bytes:
    """``kvmlab-dirty``, compiled static (the initramfs has no libc of its own for it)."""
    gcc = shutil.which("gcc")
    if gcc is None:
        raise ToolMissing("gcc", "apt-get install gcc libc6-dev")
    src, out = workdir / "dirty.c", workdir / "kvmlab-dirty"
    src.write_text(dirty_source())
    argv = [gcc, "-static", "-O2", "-Wall", "-o", str(out), str(src)]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        raise ImageError(f"cannot compile kvmlab-dirty: {proc.stderr.strip()[-800:]}")
    return out.read_bytes()


def tool_files() -> list[ToolFile]:
    """qemu-ga with its libraries and the dynamic loader, kvmlab-dirty and kvmlab-echo."""
    inputs()
    proc = subprocess.run(["ldd", str(QEMU_GA)], capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        raise ImageError(f"ldd {QEMU_GA} failed: {proc.stderr.strip()}")
    files = [ToolFile("usr/sbin/qemu-ga", QEMU_GA.read_bytes())]
    for name, path in parse_ldd(proc.stdout):
        data = path.resolve().read_bytes()
        if path.name.startswith("ld-linux"):
            files.append(ToolFile(f"lib64/{path.name}", data))
        else:
            files.append(ToolFile(f"{LIB_DIR}/{name}", data, 0o644))
    with tempfile.TemporaryDirectory(prefix="kvmlab-dirty-") as tmp:
        dirty = compile_dirty(Path(tmp))
    # the same program under a second name: a process of its own name (pidof kvmlab-dirty
    # finds the dirtier alone), the network probe's echo
    return [*files, ToolFile(DIRTY_BIN, dirty), ToolFile(ECHO_BIN, dirty)]
