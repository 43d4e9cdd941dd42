"""Fetch a Debian guest kernel into kvmlab's cache without installing it on the host.

The kernel package is found through Debian's meta package (``linux-image-amd64`` for the
generic flavour, which has 9p; ``linux-image-cloud-amd64`` for the cloud flavour, which
has virtio-fs but no 9p), so a security update of the kernel ABI is picked up by the next
build instead of being pinned here. The package is fetched with ``apt-get download``
(which checks it against the signed archive metadata), unpacked with ``dpkg -x`` and given
a ``modules.dep`` with ``busybox depmod`` (``kmod`` is not a kvmlab dependency).

Cache layout: ``<cache>/kernels/<package>_<version>/{boot,lib/modules/<release>}`` plus
:data:`MANIFEST`, the sha256 of every file (and the target of every symlink) as unpacked.
The directory is built under a temporary name and renamed into place, so it is either
complete or absent; before an image is built from it, it is verified against its manifest,
and one that does not match (altered, truncated, missing or extra files, or no manifest)
is thrown away and fetched again. Deleting is confined as :mod:`kvmlab.guest.cache` says.
"""

from __future__ import annotations

import hashlib
import json
import lzma
import os
import re
import shutil
import struct
import tempfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from kvmlab.errors import HostError, ProcessFailure
from kvmlab.guest import cache, elf
from kvmlab.guest._run import run
from kvmlab.guest.errors import ImageError

KernelFlavour = Literal["generic", "cloud"]

META_PACKAGES: dict[KernelFlavour, str] = {
    "generic": "linux-image-amd64",
    "cloud": "linux-image-cloud-amd64",
}

MANIFEST = ".kvmlab-manifest.json"
_APT_TIMEOUT = 300.0
_DEPENDS_RE = re.compile(r"^(linux-image-(\d[^\s(]*))\s*\(=\s*([^\s)]+)\)")


@dataclass(frozen=True)
class KernelPackage:
    """The versioned kernel package a meta package points at."""

    flavour: KernelFlavour
    meta: str
    name: str  # linux-image-6.1.0-56-amd64
    version: str  # 6.1.192-2
    release: str  # 6.1.0-56-amd64, what `uname -r` prints in the guest

    @property
    def cache_name(self) -> str:
        return f"{self.name}_{self.version}"


@dataclass(frozen=True)
class Kernel:
    """An unpacked kernel package in the cache."""

    package: KernelPackage
    root: Path
    vmlinuz: Path
    modules_dir: Path  # lib/modules/<release>, with modules.dep

    @property
    def release(self) -> str:
        return self.package.release


def parse_meta_depends(meta: str, show_output: str) -> tuple[str, str, str]:
    """(package, version, release) from ``apt-cache show --no-all-versions META``.

    The meta package's Depends names the ABI package with an exact version,
    e.g. ``Depends: linux-image-6.1.0-56-amd64 (= 6.1.192-2)``.
    """
    for line in show_output.splitlines():
        if line.startswith("Depends:"):
            for dep in line.removeprefix("Depends:").split(","):
                match = _DEPENDS_RE.match(dep.strip())
                if match:
                    return match.group(1), match.group(3), match.group(2)
    raise ImageError(f"{meta} does not depend on a versioned linux-image package")


def resolve_kernel_package(flavour: KernelFlavour = "generic") -> KernelPackage:
    """Ask apt (locally, no download) which kernel package the flavour's meta package means."""
    meta = META_PACKAGES[flavour]
    try:
        out = run(
            ["apt-cache", "show", "--no-all-versions", meta],
            what=f"looking up {meta}",
            timeout=60,
            install="apt (kvmlab's guest image needs a Debian host)",
        )
    except ProcessFailure as exc:
        raise HostError(
            f"apt does not know {meta}: {' '.join(exc.log_tail[-1:])}", fix=["apt-get update"]
        ) from exc
    name, version, release = parse_meta_depends(meta, out)
    return KernelPackage(flavour, meta, name, version, release)


def default_cache_dir() -> Path:
    """``$KVMLAB_CACHE``, else ``$XDG_CACHE_HOME/kvmlab``, else ``~/.cache/kvmlab``."""
    return cache.default_root()


def fetch_kernel(package: KernelPackage, cache_dir: Path | None = None) -> Kernel:
    """Return the unpacked kernel, verified, downloading and unpacking it when needed."""
    kernels = cache.section("kernels", cache_dir)
    final = kernels / package.cache_name
    if os.path.lexists(final):
        if verify_kernel(final):
            return _kernel_at(package, final)
        cache.discard(final)  # altered, half-deleted or unverifiable: fetch it again
    tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=kernels))
    try:
        _download_and_unpack(package, tmp)
        write_kernel_manifest(tmp)
        try:
            tmp.rename(final)
        except OSError:
            if not verify_kernel(final):  # not a concurrent fetcher winning the race
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return _kernel_at(package, final)


def _tree(root: Path) -> dict[str, str]:
    """{relative path: sha256 of a file, or "-> TARGET" of a symlink} below ``root``."""
    found: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(root):  # never follows symlinked dirs
        base = Path(dirpath)
        for name in [*filenames, *(d for d in dirnames if (base / d).is_symlink())]:
            path = base / name
            rel = str(path.relative_to(root))
            if path.is_symlink():
                found[rel] = f"-> {path.readlink()}"
            elif path.is_file():
                with path.open("rb") as f:
                    found[rel] = hashlib.file_digest(f, "sha256").hexdigest()
            else:
                found[rel] = "special"  # a device or fifo: never in a kernel package
    found.pop(MANIFEST, None)
    return found


def write_kernel_manifest(root: Path) -> None:
    """Record every file's sha256 (and every symlink's target) of an unpacked kernel."""
    text = json.dumps({"format": 1, "files": _tree(root)}, indent=1, sort_keys=True)
    (root / MANIFEST).write_text(text + "\n")


def verify_kernel(root: Path) -> bool:
    """Whether ``root`` is a real directory holding exactly what its manifest lists."""
    try:
        if root.is_symlink() or not root.is_dir():
            return False
        files = json.loads((root / MANIFEST).read_text())["files"]
        return isinstance(files, dict) and bool(files) and _tree(root) == files
    except (OSError, ValueError, KeyError, TypeError):
        return False


def _kernel_at(package: KernelPackage, root: Path) -> Kernel:
    return Kernel(
        package=package,
        root=root,
        vmlinuz=root / "boot" / f"vmlinuz-{package.release}",
        modules_dir=root / "lib" / "modules" / package.release,
    )


def _download_and_unpack(package: KernelPackage, dest: Path) -> None:
    download = dest / "deb"
    download.mkdir()
    argv = ["apt-get", "download", f"{package.name}={package.version}"]
    if os.geteuid() == 0:
        # apt drops to _apt for downloads, which cannot write into a 0700 temp dir.
        argv[1:1] = ["-o", "APT::Sandbox::User=root"]
    try:
        run(
            argv,
            what=f"downloading {package.name}",
            timeout=_APT_TIMEOUT,
            install="apt",
            cwd=download,
        )
    except ProcessFailure as exc:
        raise HostError(
            f"cannot download {package.name}={package.version} "
            f"({' '.join(exc.log_tail[-1:]) or 'no output'}); apt's package lists may be stale",
            fix=["apt-get update"],
        ) from exc
    debs = list(download.glob("*.deb"))
    if len(debs) != 1:
        raise ImageError(f"apt-get download left {len(debs)} .deb files in {download}")
    run(
        ["dpkg", "-x", str(debs[0]), str(dest)],
        what=f"unpacking {debs[0].name}",
        timeout=_APT_TIMEOUT,
        install="dpkg",
    )
    shutil.rmtree(download)
    kernel = _kernel_at(package, dest)
    if not kernel.vmlinuz.is_file() or not kernel.modules_dir.is_dir():
        raise ImageError(
            f"{package.name} has no boot/vmlinuz-{package.release} or lib/modules/{package.release}"
        )
    run(
        ["busybox", "depmod", "-b", str(dest), package.release],
        what=f"generating modules.dep for {package.release}",
        timeout=120,
        install="apt-get install busybox-static",
    )
    dest.chmod(0o755)


def extract_vmlinux(bzimage: bytes) -> bytes | None:
    """The uncompressed ELF kernel inside a bzImage, if it can be booted through PVH.

    QEMU loads such an ELF straight into guest memory and enters it at its PVH entry
    point: no firmware decompression. Under TCG that saves ~2.3 s per boot for Debian's
    generic kernel, whose payload is XZ. Returns None when the payload is in a format
    the standard library cannot unpack (the cloud kernel's LZ4, which decompresses fast
    enough anyway) or has no PVH entry.
    """
    if len(bzimage) < 0x250 or bzimage[0x202:0x206] != b"HdrS":
        return None
    (version,) = struct.unpack_from("<H", bzimage, 0x206)
    if version < 0x208:
        return None
    setup_sects = bzimage[0x1F1] or 4
    offset, length = struct.unpack_from("<II", bzimage, 0x248)
    start = (setup_sects + 1) * 512 + offset
    payload = bzimage[start : start + length]
    try:
        if payload.startswith(b"\xfd7zXZ\x00"):
            vmlinux = lzma.LZMADecompressor(format=lzma.FORMAT_XZ).decompress(payload)
        elif payload.startswith(b"\x1f\x8b"):
            vmlinux = zlib.decompressobj(wbits=31).decompress(payload)
        else:
            return None
    except (lzma.LZMAError, zlib.error):
        return None
    return vmlinux if elf.is_elf64(vmlinux) and elf.has_pvh_entry(vmlinux) else None
