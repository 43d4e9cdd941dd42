"""``kvmlab image``: build or reuse the default guest image, optionally a cloud-init disk."""

from __future__ import annotations

import os
import stat
import tempfile
import time
from pathlib import Path

from kvmlab.errors import UsageError, printable

FLAG = "--cloud-disk"


def run_image(rebuild: bool, cloud_disk: Path | None = None) -> None:
    """Build (or find in the cache) the default guest image and describe it; with
    ``cloud_disk``, also write a cloud-init disk there, checked before anything is built
    (:func:`check_cloud_disk`)."""
    from kvmlab.guest.image import build_default_image

    if cloud_disk is not None:
        check_cloud_disk(cloud_disk)

    if rebuild:
        # Only kvmlab's own entries go; the kernel is verified (refetched if corrupt) when
        # the image is built again.
        from kvmlab.guest.cache import clear_section

        for name in clear_section("images"):
            print(f"left alone: {name} (not a kvmlab image entry)")
    start = time.monotonic()
    image = build_default_image()
    print(f"default guest image {image.key} ({time.monotonic() - start:.1f} s)")
    print(f"  kernel   {image.kernel}  ({image.kernel_package}, {image.kernel_release})")
    print(f"  initrd   {image.initrd}")
    print(f"  share    {image.share} (tag {image.share_tag}): the host root, read-only")
    print(f"  cmdline  {image.append}")
    if cloud_disk is not None:
        from kvmlab.guest.diskimage import build_test_disk_image

        start = time.monotonic()
        written = build_test_disk_image(cloud_disk)
        print(
            f"cloud-init disk {written} ({time.monotonic() - start:.1f} s): Debian 12 with "
            "cloud-init and qemu-guest-agent, a qcow2 overlay on the cached base"
        )


def check_cloud_disk(path: Path) -> None:
    """Refuse (:class:`UsageError`, one line) a ``--cloud-disk`` path kvmlab would not
    write: anything already there (the disk is made as a new file, never over a file, a
    device or through a link), and what ``--out`` refuses (a name too long, a directory
    that does not exist: it is never created). Creating a file beside it is tried too (and
    that file removed), so that a directory that takes no files (``/sys``) is refused
    before minutes of building."""
    from kvmlab.cli.outfile import check_out

    shown = printable(str(path))
    try:
        mode: int | None = path.lstat().st_mode
    except OSError:  # nothing there, or a path that cannot be (check_out says why)
        mode = None
    if mode is not None and stat.S_ISDIR(mode):
        raise UsageError(
            f"{FLAG} {shown} is a directory; give a file name in it, e.g. "
            f"{printable(str(path / 'disk.qcow2'))}"
        )
    if mode is not None:
        raise UsageError(
            f"{FLAG} {shown} exists already; kvmlab makes the disk as a new file and writes "
            "over nothing: give a new name"
        )
    check_out(path, FLAG)
    try:
        fd, probe = tempfile.mkstemp(prefix=".kvmlab-", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise UsageError(
            f"{FLAG} {shown}: cannot create files in {printable(str(path.parent))} "
            f"({exc.strerror or exc}); give a path in a directory you can write"
        ) from None
    os.close(fd)
    Path(probe).unlink()
