"""Build (or verify in the cache) the guest images the functional tests boot, before
`make test` starts its two lanes: neither lane then builds one while the other waits on
it. Run: python -m tests.images"""

from __future__ import annotations

import sys

from kvmlab.errors import KvmlabError
from kvmlab.guest.image import build_image


def main() -> int:
    """The default image (the host root over 9p) and the self-contained one."""
    try:
        for share in ("9p", "none"):
            image = build_image(share)
            print(f"guest image ({share}): {image.kernel.parent}")
    except KvmlabError as exc:
        print(f"tests.images: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
