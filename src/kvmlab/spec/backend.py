"""``backend`` and ``[libvirt]`` of a lab: whether kvmlab runs QEMU itself or has a
libvirtd run the guests, and which libvirtd (local or remote, by libvirt URI)."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import field_validator

from kvmlab.spec.base import SpecModel

Backend = Literal["qemu", "libvirt"]

URI_PATTERN = re.compile(
    r"^qemu(\+(unix|ssh|tcp|tls|libssh|libssh2))?://[A-Za-z0-9._@:\[\]-]*/(system|session)"
    r"(\?[A-Za-z0-9._/=&%+-]*)?$"
)
DEFAULT_URI = "qemu:///system"


def check_uri(value: str) -> str:
    """A libvirt QEMU driver URI (``qemu:///system``, ``qemu+ssh://host/system``, ...)."""
    if not URI_PATTERN.match(value):
        raise ValueError(
            f"{value!r} is not a libvirt URI of the QEMU driver (for example qemu:///system, "
            "qemu+ssh://user@host/system, qemu+tcp://127.0.0.1:16509/system)"
        )
    return value


class LibvirtSpec(SpecModel):
    """`[libvirt]`: the libvirtd that runs the lab's guests with `backend = "libvirt"`."""

    uri: str = DEFAULT_URI
    """libvirt URI of the daemon (`qemu:///system`, `qemu+ssh://host/system`,
    `qemu+tcp://host:port/system`); `--connect` overrides it."""

    persistent: bool = False
    """Define the domains persistently (`virsh define`) instead of as transient domains;
    either way `kvmlab down` undefines them."""

    @field_validator("uri")
    @classmethod
    def _uri(cls, value: str) -> str:
        return check_uri(value)
