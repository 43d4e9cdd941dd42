"""``backend`` and ``[libvirt]`` of a lab: whether kvmlab runs QEMU itself or has a
libvirtd run the guests, and which libvirtd (local or remote, by libvirt URI)."""

from __future__ import annotations

import re
from ipaddress import IPv6Address
from typing import Literal

from pydantic import field_validator

from kvmlab.errors import UsageError
from kvmlab.spec.base import SpecModel
from kvmlab.spec.units import quoted

Backend = Literal["qemu", "libvirt"]

URI_PATTERN = re.compile(
    r"qemu(\+(unix|ssh|tcp|tls|libssh|libssh2))?://"
    r"(?:(?P<user>[A-Za-z0-9._%-]+)@)?(?:\[(?P<ipv6>[^\]]*)\]|(?P<host>[A-Za-z0-9._-]*))"
    r"(?::(?P<port>[0-9]*))?/system"
    r"(\?(?P<query>[A-Za-z0-9._/=&%+~-]*))?"
)
"""The whole URI (matched with ``fullmatch``: nothing after ``system`` or its parameters,
not even a newline); the host and port are checked after it."""
PARAMS = {"socket", "keyfile", "known_hosts", "no_tty", "sshauth", "mode", "pkipath"}
"""The URI parameters a lab may set (not ``no_verify``, ``command`` or ``netcat``)."""
DEFAULT_URI = "qemu:///system"
MAX_URI = 1024
"""The longest libvirt URI a lab or --connect gives (a host name and a few parameters)."""
EXAMPLES = (
    "for example qemu:///system, qemu+ssh://user@host/system, qemu+tcp://127.0.0.1:16509/system"
)


def check_uri(value: str) -> str:
    """A libvirt QEMU driver URI (``qemu:///system``, ``qemu+ssh://host/system``, ...):
    the one check of a lab's ``[libvirt] uri``, a guest's ``libvirt_uri`` and the
    ``--connect``/``--to`` options. A bracketed host is an IPv6 address, a port is
    1-65535 after a host, and no character is a space or a control character."""
    shown = quoted(value)
    if len(value) > MAX_URI:
        raise ValueError(
            f"{shown} is too long: a libvirt URI here takes at most {MAX_URI} characters"
        )
    bad = next((i for i, c in enumerate(value) if c.isspace() or not c.isprintable()), None)
    if bad is not None:
        raise ValueError(
            f"{shown} holds {value[bad]!r} at character {bad + 1}; a libvirt URI has no "
            "spaces or control characters: remove it"
        )
    match = URI_PATTERN.fullmatch(value)
    if not match:
        raise ValueError(
            f"{shown} is not a libvirt URI of the QEMU driver's system instance ({EXAMPLES})"
        )
    port, ipv6 = match.group("port"), match.group("ipv6")
    host = match.group("host") or ""
    if ipv6 is not None:
        try:
            IPv6Address(ipv6)
        except ValueError:
            raise ValueError(
                f"{shown}: [{quoted(ipv6, 40)[1:-1]}] is not an IPv6 address; between "
                "brackets goes an IPv6 address such as [::1] or [fd00::2]"
            ) from None
    elif host.startswith("-"):
        raise ValueError(f"{shown}: a host name cannot start with '-'")
    elif len(host) > 253:
        raise ValueError(
            f"{shown}: its host name has {len(host)} characters; a host name has at most 253"
        )
    elif not host and (port is not None or match.group("user")):
        what = f"port {port}" if port is not None else "a user"
        raise ValueError(
            f"{shown} gives {what} but no host: name the host (qemu+tcp://HOST:PORT/system), "
            "or leave both out for this host's daemon (qemu:///system)"
        )
    if port is not None and not (port.isdigit() and len(port) <= 5 and 0 < int(port) < 65536):
        raise ValueError(
            f"{shown}: port {quoted(port, 12)} is not 1-65535: give the daemon's port "
            "(libvirtd's tcp is 16509, its tls 16514) or leave ':PORT' out"
        )
    for pair in filter(None, (match.group("query") or "").split("&")):
        key = pair.partition("=")[0]
        if key not in PARAMS:
            raise ValueError(
                f"{shown}: URI parameter {quoted(key)} is not one kvmlab passes "
                f"(allowed: {', '.join(sorted(PARAMS))})"
            )
    return value


def uri_option(value: str, option: str) -> str:
    """``value`` given as ``option`` (``--connect``, ``--to``): a bad one is a
    :class:`UsageError` naming the option."""
    try:
        return check_uri(value)
    except ValueError as exc:
        raise UsageError(f"{option}: {exc}") from None


class LibvirtSpec(SpecModel):
    """`[libvirt]`: the libvirtd that runs the lab's guests with `backend = "libvirt"`."""

    uri: str = DEFAULT_URI
    """libvirt URI of the daemon (`qemu:///system`, `qemu+ssh://host/system`,
    `qemu+tcp://host:port/system`); `--connect` overrides it."""

    persistent: bool = False
    """Define the domains persistently (`virsh define`) instead of as transient domains;
    either way `kvmlab down` undefines them."""

    qemu_as_root: bool = False
    """Let libvirt run a domain's QEMU as root where kvmlab needs it: vhost-user NICs on the
    lab's switch (its sockets are in kvmlab's private run directory), or a guest hypervisor
    whose kvmlab inside cannot read kvmlab's install or image cache as libvirt's QEMU user.
    Such a guest booting the default image reads the host root as root, without kvmlab's
    masked host view. Off: those guests are refused; `--qemu-as-root` overrides it."""

    @field_validator("uri")
    @classmethod
    def _uri(cls, value: str) -> str:
        return check_uri(value)
