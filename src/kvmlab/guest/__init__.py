"""The guest runtime's groundwork: the embedded default guest image and the agent client.

- :func:`kvmlab.guest.image.build_default_image` returns a cached :class:`GuestImage`
  (a Debian kernel plus kvmlab's initramfs that boots into the host's root, shared
  read-only under a tmpfs overlay, and starts the host's qemu-ga);
- :class:`kvmlab.guest.agent.GuestAgent` talks to that qemu-ga (sync, ping, exec).

Importing this package does no work: nothing is built or probed until called.
"""

from kvmlab.guest.agent import ExecResult, GuestAgent
from kvmlab.guest.image import GuestImage, build_default_image, build_image, open_image

__all__ = [
    "ExecResult",
    "GuestAgent",
    "GuestImage",
    "build_default_image",
    "build_image",
    "open_image",
]
