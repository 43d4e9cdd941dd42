"""``kvmlab image``: build or reuse the default guest image, optionally a cloud-init disk."""

from __future__ import annotations

import time
from pathlib import Path


def run_image(rebuild: bool, cloud_disk: Path | None = None) -> None:
    """Build (or find in the cache) the default guest image and describe it."""
    from kvmlab.guest.image import build_default_image

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
        cloud_disk.parent.mkdir(parents=True, exist_ok=True)
        written = build_test_disk_image(cloud_disk)
        print(
            f"cloud-init disk {written} ({time.monotonic() - start:.1f} s): Debian 12 with "
            "cloud-init and qemu-guest-agent, a qcow2 overlay on the cached base"
        )
