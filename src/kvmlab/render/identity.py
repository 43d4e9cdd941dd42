"""Stable identities derived from names: MAC addresses and domain UUIDs."""

from __future__ import annotations

import hashlib
import uuid

_NAMESPACE = uuid.UUID("5b0c9f0e-6a53-4b8e-9d0a-6b766d6c6162")


def derived_mac(lab: str, address: tuple[str, ...], index: int) -> str:
    """A locally administered-looking QEMU MAC (52:54:00:..) stable for lab/guest/NIC."""
    digest = hashlib.sha256(f"{lab}/{'/'.join(address)}/{index}".encode()).digest()
    return "52:54:00:" + ":".join(f"{b:02x}" for b in digest[:3])


def domain_uuid(lab: str, address: tuple[str, ...]) -> str:
    """The libvirt domain UUID of a guest: the same for the same lab and guest."""
    return str(uuid.uuid5(_NAMESPACE, f"{lab}/{'/'.join(address)}"))


def tap_name(lab: str, address: tuple[str, ...], index: int) -> str:
    """The tap of a NIC on a lab network: ``kvt`` + 9 hex digits + index (a guest has at
    most 28 NICs: at most 14 characters, under Linux's 15), stable for lab/guest/NIC."""
    digest = hashlib.sha256(f"tap/{lab}/{'/'.join(address)}".encode()).hexdigest()
    return f"kvt{digest[:9]}{index}"
