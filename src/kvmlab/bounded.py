"""Reading what a user hands kvmlab without trusting its size."""

from __future__ import annotations

import os


def read_at_most(fd: int, limit: int) -> bytes | None:
    """The bytes of open file ``fd``, or None when it holds more than ``limit``: never more
    than one byte past the limit is read, so ``/dev/zero`` or a growing file ends at once."""
    chunks: list[bytes] = []
    size = 0
    while size <= limit:
        chunk = os.read(fd, limit + 1 - size)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return None if size > limit else b"".join(chunks)
