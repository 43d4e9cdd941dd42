"""The embedded default guest image: a Debian kernel and kvmlab's initramfs, cached.

Entries live in ``<cache>/images/<key>/`` where ``key`` hashes every input (kernel package
and version, the busybox binary, init.sh, the module groups, the share kind, the kernel
command line and :data:`BUILDER_VERSION`), so changing any of them builds a new entry and
an unchanged host reuses the old one. Each entry has a ``manifest.json`` with the sha256 of
every file; an entry whose files do not match it (truncated, altered, missing, extra) is
thrown away and rebuilt. Entries are built in a 0700 temporary directory and renamed into
place, so a crash never leaves a half-written entry under a valid key. The kernel an image is
built from is verified too (:func:`kvmlab.guest.kernel.fetch_kernel`), and nothing is
deleted but kvmlab's own entries (:mod:`kvmlab.guest.cache`).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from kvmlab.errors import ToolMissing
from kvmlab.guest import cache as cache_root
from kvmlab.guest import initramfs, standalone
from kvmlab.guest.errors import ImageError
from kvmlab.guest.kernel import (
    KernelFlavour,
    default_cache_dir,
    extract_vmlinux,
    fetch_kernel,
    resolve_kernel_package,
)

ShareKind = Literal["9p", "virtiofs", "none"]
"""How the image reaches the host root; ``none``: it does not (see kvmlab.guest.standalone)."""

BUILDER_VERSION = "4"  # 3: init loads modules with modprobe; 4: virtio-scsi disks
STANDALONE: ShareKind = "none"
DEFAULT_SHARE: ShareKind = "9p"
SHARE_TAG = "hostfs"
AGENT_PORT_NAME = "org.qemu.guest_agent.0"
VIRTIOFSD = Path("/usr/lib/qemu/virtiofsd")
# The generic kernel has 9p and virtio-fs; the cloud kernel (smaller) only virtio-fs.
FLAVOUR_FOR_SHARE: Mapping[ShareKind, KernelFlavour] = {
    "9p": "generic",
    "virtiofs": "cloud",
    "none": "generic",
}
# panic=-1: a failed init reboots at once, which -no-reboot turns into QEMU exiting.
# cryptomgr.notests=1: no self-test of every crypto algorithm at registration (a lab guest
# is no FIPS module): the kernel stage under TCG went 1.71-1.91 s -> 1.51 s (initcall_debug
# showed crypto_algapi_init alone at 244 ms).
# pci=noearly,lastbus=0: no scan of all 256 buses before ACPI enumerates the PCI tree (the
# AGP aperture search, twice where the vCPU reports AMD family 0xf as TCG's does, and the
# peer host bridge search): ~25,000 port or MMIO reads, each a VM exit. An L2 under KVM inside
# a TCG L1 pays ~0.1 ms per exit there: its kernel stage went 9.1 -> 4.9 s (dmesg, 2026-11-28).
# QEMU's extra root buses (pxb) are in its ACPI tables, so nothing is lost.
BASE_APPEND = "console=ttyS0 quiet panic=-1 cryptomgr.notests=1 pci=noearly,lastbus=0"

MANIFEST = "manifest.json"
KERNEL_FILE = "kernel"  # an ELF vmlinux booted through PVH, or the bzImage
INITRD_FILE = "initrd.img"


@dataclass(frozen=True)
class GuestImage:
    """What a QEMU command line needs to boot the default guest."""

    kernel: Path
    initrd: Path
    append: str  # base kernel command line; see cmdline() for per-guest parameters
    share: ShareKind
    share_tag: str
    kernel_release: str
    kernel_package: str  # name=version
    key: str
    pvh: bool  # kernel is the uncompressed ELF vmlinux (QEMU enters it through PVH)
    agent_port_name: str = AGENT_PORT_NAME

    @property
    def needs_shared_memory(self) -> bool:
        """virtio-fs (vhost-user) needs guest RAM from ``memory-backend-memfd,share=on``."""
        return self.share == "virtiofs"

    @property
    def virtiofsd(self) -> Path | None:
        """The daemon to start per guest (``--socket-path=S -o source=/ -o cache=always
        -o sandbox=chroot``), or None for 9p, which QEMU serves itself."""
        return VIRTIOFSD if self.share == "virtiofs" else None

    def cmdline(
        self, *, hostname: str | None = None, kvm: bool = False, vhost: bool = False
    ) -> str:
        """The kernel command line with init.sh's per-guest parameters."""
        parts = [self.append]
        if hostname:
            if len(hostname) > 64 or not all(
                c.isascii() and (c.isalnum() or c in "-._") for c in hostname
            ):
                raise ImageError(
                    f"bad hostname {hostname!r}: up to 64 of letters, digits, '-', '_', '.'"
                )
            parts.append(f"kvmlab.hostname={hostname}")
        if kvm:
            parts.append("kvmlab.kvm=1")
        if vhost:
            parts.append("kvmlab.vhost=1")
        return " ".join(parts)


def build_default_image(cache_dir: Path | None = None) -> GuestImage:
    """The default guest image, built on first use and taken from the cache afterwards."""
    return build_image(DEFAULT_SHARE, cache_dir=cache_dir)


def build_image(
    share: ShareKind,
    *,
    flavour: KernelFlavour | None = None,
    cache_dir: Path | None = None,
) -> GuestImage:
    """Build (or reuse) an image sharing the host root over ``share`` (``none``: a
    self-contained one that can be live-migrated, see :mod:`kvmlab.guest.standalone`)."""

    cache = cache_dir or default_cache_dir()
    if flavour is None:
        flavour = FLAVOUR_FOR_SHARE[share]
    if share == "9p" and flavour == "cloud":
        raise ImageError("Debian's cloud kernel has no 9p; use the generic kernel or virtiofs")
    package = resolve_kernel_package(flavour)
    busybox = shutil.which("busybox")
    if busybox is None:
        raise ToolMissing("busybox", "apt-get install busybox-static")
    init = initramfs.init_script()
    groups = initramfs.groups_for(share)
    append = f"{BASE_APPEND} kvmlab.share={share} kvmlab.tag={SHARE_TAG}"
    inputs = {
        "builder": BUILDER_VERSION,
        "kernel": f"{package.name}={package.version}",
        "busybox": _sha256(Path(busybox)),
        "init": hashlib.sha256(init.encode()).hexdigest(),
        "modules": json.dumps(
            {g: initramfs.MODULE_GROUPS[g] for g in groups} | {"params": initramfs.MODULE_PARAMS},
            sort_keys=True,
        ),
        "share": share,
        "append": append,
    }
    if share == STANDALONE:
        inputs |= standalone.inputs()

    def build(dest: Path) -> dict[str, str]:
        kernel = fetch_kernel(package, cache)
        vmlinux = extract_vmlinux(kernel.vmlinuz.read_bytes())
        if vmlinux is None:
            shutil.copyfile(kernel.vmlinuz, dest / KERNEL_FILE)
        else:
            (dest / KERNEL_FILE).write_bytes(vmlinux)
        initramfs.build_initramfs(
            dest / INITRD_FILE,
            busybox=Path(busybox),
            modules_dir=kernel.modules_dir,
            release=package.release,
            groups=groups,
            init=init,
            extra=standalone.tool_files() if share == STANDALONE else (),
        )
        return {
            "append": append,
            "share": share,
            "share_tag": SHARE_TAG,
            "kernel_release": package.release,
            "kernel_package": inputs["kernel"],
            "pvh": "yes" if vmlinux is not None else "no",
        }

    key = cache_key(inputs)
    entry, meta = ensure_entry(cache / "images", key, inputs, build)
    return _image(entry, key, meta)


def open_image(entry: Path, *, verify: bool = True) -> GuestImage:
    """The image in cache entry ``entry``, without asking apt or rebuilding anything.

    For a guest that boots guests (an L1 sees L0's cache through the share): the L0 image
    is reused as it is, and ``verify=False`` skips re-hashing files L0 just verified.
    """
    try:
        manifest = json.loads((entry / MANIFEST).read_text())
        key, meta = manifest["key"], manifest["meta"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ImageError(f"{entry} is not a guest image cache entry: {exc}") from exc
    if verify and verify_entry(entry, key) is None:
        raise ImageError(f"guest image {entry} does not match its manifest")
    return _image(entry, key, meta)


def _image(entry: Path, key: str, meta: Mapping[str, str]) -> GuestImage:
    share: ShareKind
    if meta.get("share") == "9p":
        share = "9p"
    elif meta.get("share") == "virtiofs":
        share = "virtiofs"
    elif meta.get("share") == STANDALONE:
        share = STANDALONE
    else:
        raise ImageError(f"guest image {entry}: unknown share kind {meta.get('share')!r}")
    try:
        return GuestImage(
            kernel=entry / KERNEL_FILE,
            initrd=entry / INITRD_FILE,
            append=meta["append"],
            share=share,
            share_tag=meta["share_tag"],
            kernel_release=meta["kernel_release"],
            kernel_package=meta["kernel_package"],
            key=key,
            pvh=meta["pvh"] == "yes",
        )
    except KeyError as exc:
        raise ImageError(f"guest image {entry}: manifest lacks {exc}") from exc


def cache_key(inputs: Mapping[str, str]) -> str:
    """A short stable hash of the build inputs."""
    return hashlib.sha256(json.dumps(dict(inputs), sort_keys=True).encode()).hexdigest()[:24]


def ensure_entry(
    images: Path,
    key: str,
    inputs: Mapping[str, str],
    build: Callable[[Path], Mapping[str, str]],
) -> tuple[Path, dict[str, str]]:
    """Return ``images/key`` and its metadata, (re)building it unless it verifies.

    ``images`` is a section of the cache root (``images``, ``disks``), checked first.
    ``build(tmpdir)`` writes the entry's files into tmpdir and returns metadata to keep
    in the manifest.
    """
    images = cache_root.section_of(images)
    entry = images / key
    if os.path.lexists(entry):
        meta = verify_entry(entry, key)
        if meta is not None:
            return entry, meta
        cache_root.discard(entry)
    tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=images))
    try:
        meta = dict(build(tmp))
        write_manifest(tmp, key, inputs, meta)
        tmp.chmod(0o755)  # readable by a QEMU running as another user, if the cache is
        try:
            tmp.rename(entry)
        except OSError:
            # Another builder published the same key first; use theirs if it is sound.
            if verify_entry(entry, key) is None:
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return entry, meta


def write_manifest(
    entry: Path, key: str, inputs: Mapping[str, str], meta: Mapping[str, str]
) -> None:
    """Record the key, inputs, metadata and the sha256 of every file in ``entry``."""
    files = {p.name: _sha256(p) for p in sorted(entry.iterdir()) if p.name != MANIFEST}
    manifest = {"format": 1, "key": key, "inputs": dict(inputs), "meta": dict(meta), "files": files}
    (entry / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")


def verify_entry(entry: Path, key: str) -> dict[str, str] | None:
    """The entry's metadata if it holds exactly the files its manifest lists, with their
    hashes; None if anything is off."""
    try:
        if entry.is_symlink() or any(p.is_symlink() for p in entry.iterdir()):
            return None
        manifest = json.loads((entry / MANIFEST).read_text())
        files, meta = manifest["files"], manifest["meta"]
        if manifest.get("key") != key or not isinstance(files, dict) or not files:
            return None
        if not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values()):
            return None
        present = {p.name for p in entry.iterdir() if p.name != MANIFEST}
        if present != set(files):
            return None
        if all(_sha256(entry / name) == digest for name, digest in files.items()):
            return {str(k): v for k, v in meta.items()}
        return None
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _sha256(path: Path) -> str:
    with path.open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def latest_cached_image(
    cache_dir: Path | None = None, share: ShareKind = DEFAULT_SHARE
) -> GuestImage | None:
    """The newest cached image of kind ``share``, without apt or hashing (``kvmlab render``)."""
    root = (cache_dir or default_cache_dir()) / "images"
    entries = sorted(root.glob(f"*/{MANIFEST}"), key=lambda p: p.stat().st_mtime, reverse=True)
    for manifest in entries:
        try:
            image = open_image(manifest.parent, verify=False)
        except ImageError:
            continue
        if image.share == share:
            return image
    return None


def placeholder_image(
    cache_dir: Path | None = None, share: ShareKind = DEFAULT_SHARE
) -> GuestImage:
    """Where the image will be, for rendering before ``kvmlab image`` built it."""
    entry = (cache_dir or default_cache_dir()) / "images" / "NOT-BUILT-YET"
    return GuestImage(
        kernel=entry / KERNEL_FILE,
        initrd=entry / INITRD_FILE,
        append=f"{BASE_APPEND} kvmlab.share={share} kvmlab.tag={SHARE_TAG}",
        share=share,
        share_tag=SHARE_TAG,
        kernel_release="unknown",
        kernel_package="unknown",
        key="NOT-BUILT-YET",
        pvh=True,
    )
