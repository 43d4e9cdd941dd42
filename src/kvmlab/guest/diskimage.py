"""A small Debian 12 disk image with cloud-init and qemu-guest-agent, for ``boot = "disk"``.

Built offline from Debian packages only, cached, and handed out as thin qcow2 overlays:

1. ``mmdebstrap --mode=unshare --variant=minbase`` installs :data:`PACKAGES` into a
   directory. As root, unshare mode keeps the user namespace but gives the build its own
   mount and PID namespaces, so nothing it mounts (/proc, /sys in the chroot) can outlive
   it on the host, even if it is killed.
2. The tree is configured from the host (fstab, cloud-init's datasource and locale).
3. The disk is MBR-partitioned: (1) a FAT32 partition with SYSLINUX, the kernel and the
   initrd; (2) the ext4 root, made with ``mkfs.ext4 -d`` from the tree. SeaBIOS boots the
   MBR (syslinux' ``mbr.bin``), which boots SYSLINUX from the active FAT partition.
   SYSLINUX is used because, unlike GRUB or EXTLINUX, it installs into a filesystem
   image with mtools: no loop device and no mount. (A kernel update inside the guest does
   not reach the FAT partition; this is a test image.)
4. ``qemu-img convert`` concatenates MBR, FAT and root into one qcow2, which goes into
   ``<cache>/disks/<key>/`` (key: every input, including the kernel package version apt
   resolves, so a security update builds a new image) with a sha256 manifest, through
   :func:`kvmlab.guest.image.ensure_entry`. Only the qcow2 is kept.

Measured here (Debian 12, 2 cores, deb.debian.org): the build takes 60 s (mmdebstrap
43 s; once 112 s with a slower mirror and a loaded host); the qcow2 is 435 MiB; a cached
call takes ~1-2 s (it re-hashes the image). Under TCG (``-smp 2 -m 1G``) the guest agent
answers 23-54 s after QEMU starts (~40 s typical; the spread is other QEMUs on the host)
and cloud-init finishes ~20 s later; ACPI power-off takes 4-7 s.
"""

from __future__ import annotations

import errno
import hashlib
import os
import shutil
import struct
import tempfile
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from kvmlab.errors import HostError, ToolMissing, printable
from kvmlab.guest._run import run
from kvmlab.guest.errors import ImageError
from kvmlab.guest.image import cache_key, ensure_entry
from kvmlab.guest.kernel import default_cache_dir, resolve_kernel_package

BUILDER_VERSION = "1"
SUITE = "bookworm"
SOURCES = (
    "deb http://deb.debian.org/debian bookworm main",
    "deb http://deb.debian.org/debian bookworm-updates main",
    "deb http://deb.debian.org/debian-security bookworm-security main",
)
PACKAGES = (
    "systemd-sysv",
    "udev",
    "linux-image-cloud-amd64",
    "cloud-init",
    "qemu-guest-agent",
    "sudo",
    "ifupdown",
    "e2fsprogs",
    "dbus",
)
"""Besides minbase: init, kernel (its postinst makes the initrd), cloud-init, the agent,
sudo for the cloud-init user, ifupdown for cloud-init's network config, and dbus, without
which systemd-logind does not run and the guest ignores ACPI power-off (``kvmlab down``)."""
DPKG_OPTIONS = (
    "path-exclude=/usr/share/man/*",
    "path-exclude=/usr/share/doc/*",
    "path-include=/usr/share/doc/*/copyright",
    "path-exclude=/usr/share/info/*",
    "path-exclude=/usr/share/locale/*",
)
CLOUD_CFG = """\
# kvmlab test image: read only the NoCloud seed (no probing for clouds), and keep the
# locale minbase has (Debian's locale-gen ignores cloud-init's en_US.UTF-8 request).
datasource_list: [NoCloud, None]
locale: C.UTF-8
"""
APPEND = "root=UUID={uuid} ro console=ttyS0,115200"
SYSLINUX_CFG = """\
DEFAULT linux
PROMPT 0
TIMEOUT 0
LABEL linux
  LINUX /vmlinuz
  INITRD /initrd.img
  APPEND {append}
"""
MBR_CODE = Path("/usr/lib/syslinux/mbr/mbr.bin")
DISK_FILE = "disk.qcow2"

SECTOR = 512
MIB = 1024 * 1024
BOOT_START = MIB // SECTOR  # the first partition starts at 1 MiB, as partitioners do
MIN_BOOT = 64 * MIB  # FAT32 needs 65525 clusters; 1-sector clusters need ~33 MiB
MIN_ROOT = 3 * 1024 * MIB  # the qcow2 stores only what is used
FAT32_LBA = 0x0C
LINUX = 0x83

TOOLS = {
    "mmdebstrap": "apt-get install mmdebstrap",
    "mformat": "apt-get install mtools",
    "mcopy": "apt-get install mtools",
    "syslinux": "apt-get install syslinux syslinux-common",
    "mkfs.ext4": "apt-get install e2fsprogs",
    "qemu-img": "apt-get install qemu-utils",
}
_BOOTSTRAP_TIMEOUT = 1800.0
_TOOL_TIMEOUT = 600.0


@dataclass(frozen=True)
class Partition:
    """One MBR partition table entry (LBA only: the CHS fields say "use LBA")."""

    start: int  # sectors
    sectors: int
    kind: int
    active: bool = False

    def entry(self) -> bytes:
        """The 16-byte table entry."""
        chs = b"\xfe\xff\xff"
        return struct.pack(
            "<B3sB3sII", 0x80 if self.active else 0, chs, self.kind, chs, self.start, self.sectors
        )


def mbr(code: bytes, partitions: Sequence[Partition], signature: int) -> bytes:
    """A 512-byte master boot record: boot code, disk signature, up to 4 partitions."""
    if len(code) > 440:
        raise ImageError(f"MBR boot code is {len(code)} bytes; at most 440 fit")
    if len(partitions) > 4:
        raise ImageError("an MBR holds at most 4 primary partitions")
    table = b"".join(p.entry() for p in partitions).ljust(64, b"\0")
    return code.ljust(440, b"\0") + struct.pack("<IH", signature, 0) + table + b"\x55\xaa"


def build_test_disk_image(dest: Path, cache_dir: Path | None = None) -> Path:
    """A fresh qcow2 overlay at ``dest`` on the cached test image (built on first use).

    Whatever the guest writes goes to ``dest``; the cached image stays untouched, and must
    stay where it is while ``dest`` is used (it is ``dest``'s backing file).

    ``dest`` must be new: the overlay is made as a temporary file beside it and linked
    there only if nothing is (an existing file is never replaced), in a directory that
    exists (never created). A file that cannot be written is :class:`ImageError`, one line.
    """
    base = cached_test_disk_image(cache_dir)
    try:
        # a short name of its own: any name the filesystem takes for ``dest`` can be made
        fd, tmp_name = tempfile.mkstemp(prefix=".kvmlab-", suffix=".tmp", dir=dest.parent)
    except OSError as exc:
        raise _not_written(dest, exc) from None
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        _tool(
            ["qemu-img", "create", "-q", "-f", "qcow2", "-F", "qcow2", "-b", str(base), str(tmp)],
            f"creating an overlay on {base}",
            60,
        )
        _place_new(tmp, dest)
    finally:
        tmp.unlink(missing_ok=True)
    return dest


def _place_new(tmp: Path, dest: Path) -> None:
    """``tmp`` at ``dest``, which must not exist: a hard link (atomic, refused when
    ``dest`` is there); where links are not supported (FAT), a rename after checking."""
    try:
        os.link(tmp, dest, follow_symlinks=False)
        return
    except FileExistsError:
        raise _not_written(dest, FileExistsError(errno.EEXIST, "exists")) from None
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.EMLINK, errno.ENOSYS):
            raise _not_written(dest, exc) from None
    if os.path.lexists(dest):
        raise _not_written(dest, FileExistsError(errno.EEXIST, "exists"))
    try:
        tmp.rename(dest)
    except OSError as exc:
        raise _not_written(dest, exc) from None


def _not_written(dest: Path, exc: OSError) -> ImageError:
    """Why the disk ``dest`` could not be written, and what to do, in one line."""
    shown = printable(str(dest))
    if exc.errno == errno.EEXIST:
        return ImageError(
            f"{shown} appeared while the disk was made; kvmlab makes the disk as a new file "
            "and writes over nothing: give a new name"
        )
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return ImageError(f"cannot write the disk {shown}: the disk is full; free some space")
    why = exc.strerror or str(exc)
    return ImageError(
        f"cannot write the disk {shown}: {why}; give a path in a directory you can write"
    )


def cached_test_disk_image(cache_dir: Path | None = None) -> Path:
    """The cached base image (read-only; boot it through an overlay), built if missing."""
    if os.geteuid() != 0:
        raise HostError(
            "building the test disk image needs root: mmdebstrap installs packages in a "
            "chroot and mkfs.ext4 -d must keep the files' owners",
            fix=["run as root (sudo)"],
        )
    for tool, install in TOOLS.items():
        if shutil.which(tool) is None:
            raise ToolMissing(tool, install)
    if not MBR_CODE.is_file():
        raise ToolMissing(str(MBR_CODE), "apt-get install syslinux-common")
    kernel = resolve_kernel_package("cloud")
    inputs = {
        "builder": BUILDER_VERSION,
        "suite": SUITE,
        "sources": "\n".join(SOURCES),
        "packages": " ".join(PACKAGES),
        "dpkg": "\n".join(DPKG_OPTIONS),
        "cloud_cfg": CLOUD_CFG,
        "syslinux": SYSLINUX_CFG + APPEND,
        "kernel": f"{kernel.name}={kernel.version}",
        "mbr": _sha256(MBR_CODE),
        "syslinux_bin": _sha256(Path(str(shutil.which("syslinux")))),
    }
    key = cache_key(inputs)
    entry, _ = ensure_entry(
        (cache_dir or default_cache_dir()) / "disks", key, inputs, lambda dest: _build(dest, key)
    )
    return entry / DISK_FILE


def _build(dest: Path, key: str) -> dict[str, str]:
    """Build the image into ``dest/DISK_FILE``; the work tree is removed whatever happens."""
    root_uuid = str(uuid.UUID(hashlib.sha256(f"root {key}".encode()).hexdigest()[:32]))
    signature = int(hashlib.sha256(f"mbr {key}".encode()).hexdigest()[:8], 16)
    work = Path(tempfile.mkdtemp(prefix=".work-", dir=dest.parent))
    try:
        tree = work / "root"
        tree.mkdir()
        _bootstrap(tree)
        release = _configure(tree, root_uuid)
        append = APPEND.format(uuid=root_uuid)
        boot = _boot_partition(work / "boot.img", tree, release, append)
        root = _root_partition(work / "root.img", tree, root_uuid)
        shutil.rmtree(tree)
        boot_sectors = boot.stat().st_size // SECTOR
        parts = [
            Partition(BOOT_START, boot_sectors, FAT32_LBA, active=True),
            Partition(BOOT_START + boot_sectors, root.stat().st_size // SECTOR, LINUX),
        ]
        head = work / "mbr.img"
        head.write_bytes(mbr(MBR_CODE.read_bytes(), parts, signature).ljust(MIB, b"\0"))
        image = dest / DISK_FILE
        _tool(
            ["qemu-img", "convert", "-O", "qcow2", str(head), str(boot), str(root), str(image)],
            "writing the qcow2 image",
            _TOOL_TIMEOUT,
        )
        image.chmod(0o444)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return {"kernel_release": release, "root_uuid": root_uuid, "append": append}


def _bootstrap(tree: Path) -> None:
    argv = [
        "mmdebstrap",
        "--mode=unshare",
        "--variant=minbase",
        "--format=directory",
        f"--include={','.join(PACKAGES)}",
        '--aptopt=Acquire::Languages "none"',
        *(f"--dpkgopt={o}" for o in (*DPKG_OPTIONS, "force-unsafe-io")),
        SUITE,
        str(tree),
        *SOURCES,
    ]
    _tool(argv, f"installing Debian {SUITE} into {tree}", _BOOTSTRAP_TIMEOUT)


def _configure(tree: Path, root_uuid: str) -> str:
    """Make the tree a bootable system; return its kernel release."""
    releases = [p.name.removeprefix("vmlinuz-") for p in (tree / "boot").glob("vmlinuz-*")]
    if len(releases) != 1 or not (tree / "boot" / f"initrd.img-{releases[0]}").is_file():
        raise ImageError(f"expected one kernel and its initrd in {tree / 'boot'}: {releases}")
    (tree / "etc/fstab").write_text(f"UUID={root_uuid} / ext4 errors=remount-ro 0 1\n")
    (tree / "etc/hostname").write_text("debian\n")  # cloud-init sets the guest's name
    (tree / "etc/resolv.conf").unlink(missing_ok=True)  # the host's, copied in for apt
    (tree / "etc/cloud/cloud.cfg.d/90-kvmlab.cfg").write_text(CLOUD_CFG)
    dpkg_cfg = tree / "etc/dpkg/dpkg.cfg.d/99mmdebstrap"
    if dpkg_cfg.is_file():  # keep the path excludes, drop the build-time unsafe I/O
        lines = dpkg_cfg.read_text().splitlines()
        dpkg_cfg.write_text("".join(f"{x}\n" for x in lines if x != "force-unsafe-io"))
    return releases[0]


def _boot_partition(path: Path, tree: Path, release: str, append: str) -> Path:
    """A FAT32 filesystem image with SYSLINUX, the kernel and the initrd."""
    kernel = tree / "boot" / f"vmlinuz-{release}"
    initrd = tree / "boot" / f"initrd.img-{release}"
    need = kernel.stat().st_size + initrd.stat().st_size + 8 * MIB
    size = max(MIN_BOOT, -(-need // MIB) * MIB)
    # -H: the partition's offset, which SYSLINUX's boot sector reads from the BPB.
    _tool(
        [
            "mformat",
            "-i",
            str(path),
            "-C",
            "-F",
            "-T",
            str(size // SECTOR),
            "-h",
            "64",
            "-s",
            "32",
            "-H",
            str(BOOT_START),
            "-v",
            "KVMLABBOOT",
            "::",
        ],
        "formatting the boot partition",
        120,
    )
    _tool(["syslinux", "--install", str(path)], "installing SYSLINUX", 120)
    cfg = path.with_name("syslinux.cfg")
    cfg.write_text(SYSLINUX_CFG.format(append=append))
    for src, name in ((kernel, "vmlinuz"), (initrd, "initrd.img"), (cfg, "syslinux.cfg")):
        _tool(["mcopy", "-i", str(path), str(src), f"::/{name}"], f"copying {name}", 120)
    return path


def _root_partition(path: Path, tree: Path, root_uuid: str) -> Path:
    """An ext4 filesystem image holding ``tree``, with room to spare."""
    used = sum(p.lstat().st_blocks * 512 for p in tree.rglob("*"))
    size = max(MIN_ROOT, -(-2 * used // MIB) * MIB)
    _tool(
        [
            "mkfs.ext4",
            "-q",
            "-F",
            "-d",
            str(tree),
            "-L",
            "kvmlab-root",
            "-U",
            root_uuid,
            str(path),
            f"{size // 1024}k",
        ],
        "making the root filesystem",
        _TOOL_TIMEOUT,
    )
    return path


def _tool(argv: list[str], what: str, timeout: float) -> str:
    return run(argv, what=what, timeout=timeout, install=TOOLS.get(argv[0], "apt-get"))


def _sha256(path: Path) -> str:
    with path.open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()
