"""The guest runtime's groundwork: the embedded default guest image and the agent client.

- :func:`kvmlab.guest.image.build_default_image` returns a cached
  :class:`~kvmlab.guest.image.GuestImage` (a Debian kernel plus kvmlab's initramfs that
  boots into the host's root, shared read-only under a tmpfs overlay, and starts the
  host's qemu-ga);
- :class:`kvmlab.guest.agent.GuestAgent` talks to that qemu-ga (sync, ping, exec).

Importing this package imports nothing: kvmlab's guest-side programs (``kvmlab-rtc``)
live here and start inside guests, where every module is read over a 9p share (two of
them in L2), so they load only what they use.
"""
