"""The NoCloud seed kvmlab attaches to ``boot = "disk"`` guests that run cloud-init.

The seed is an ISO 9660 filesystem labelled ``cidata`` (made by ``genisoimage``, as
cloud-utils' ``cloud-localds`` does) holding two files:

- ``meta-data``: an ``instance-id`` of the hostname plus a hash of the seed's content, so a
  changed seed makes cloud-init run its per-instance modules again, and ``local-hostname``;
- ``user-data``: ``#cloud-config`` creating the user (passwordless sudo, locked password,
  the ssh keys) and, with ``agent``, a per-boot script that enables and starts
  qemu-guest-agent after cloud-init has created the user.

Both are written as JSON, which YAML parsers (cloud-init's among them) read as YAML: valid
by construction, with no YAML library on the host. There is no ``network-config``:
cloud-init's fallback, DHCP on the first NIC, is what a lab guest wants, and a version 2
config cannot name "the first NIC" without knowing its name or MAC.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import pwd
import re
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kvmlab.errors import ToolMissing
from kvmlab.guest._run import run
from kvmlab.guest.errors import GuestError
from kvmlab.spec import CloudInit

VOLUME_LABEL = "cidata"
USER_DATA = "user-data"
META_DATA = "meta-data"
AGENT_SCRIPT = "/var/lib/cloud/scripts/per-boot/kvmlab-agent"
"""Run by cloud-init's scripts-per-boot module, after users and hostname are set up."""

AGENT_SCRIPT_TEXT = """\
#!/bin/sh
# Written by kvmlab: the host drives this guest through qemu-guest-agent.
exec systemctl enable --now qemu-guest-agent
"""
GENISOIMAGE_INSTALL = "apt-get install genisoimage"
_HOSTNAME_RE = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$")


class SeedError(GuestError):
    """The cloud-init seed cannot be written from the spec as given."""


def default_ssh_keys(home: Path | None = None) -> list[str]:
    """The public keys in ``home/.ssh/*.pub``; ``home`` defaults to the invoking user's.

    The invoking user is ``$SUDO_USER`` when kvmlab runs as root through sudo, so the
    person who typed the command can log in, not root.
    """
    if home is None:
        home = _invoking_home()
    keys: list[str] = []
    for pub in sorted((home / ".ssh").glob("*.pub")):
        with contextlib.suppress(OSError, UnicodeDecodeError):
            keys.extend(_key_lines(pub.read_text()))
    return keys


def _invoking_home() -> Path:
    sudo_user = os.environ.get("SUDO_USER")
    if os.geteuid() == 0 and sudo_user:
        with contextlib.suppress(KeyError):
            return Path(pwd.getpwnam(sudo_user).pw_dir)
    return Path.home()


def _key_lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip() and line[0] != "#"]


def user_data(spec: CloudInit, ssh_keys: Sequence[str]) -> dict[str, Any]:
    """The ``#cloud-config`` document (without its header line) for ``spec``."""
    for key in ssh_keys:
        if not key.strip() or "\n" in key or "\r" in key:
            raise SeedError(f"cloud_init.ssh_keys: {key!r} is not a one-line public key")
    user: dict[str, Any] = {
        "name": spec.user,
        "shell": "/bin/bash",
        "sudo": "ALL=(ALL) NOPASSWD:ALL",
        "lock_passwd": True,
    }
    if ssh_keys:
        user["ssh_authorized_keys"] = [k.strip() for k in ssh_keys]
    config: dict[str, Any] = {
        "users": [user],  # no "default": the image's own default user is not created
        "ssh_pwauth": False,
        "disable_root": True,
        "manage_etc_hosts": True,  # sudo resolves the hostname without DNS
    }
    if spec.agent:
        config["write_files"] = [
            {"path": AGENT_SCRIPT, "permissions": "0755", "content": AGENT_SCRIPT_TEXT}
        ]
    return config


def render_user_data(config: dict[str, Any]) -> str:
    """``#cloud-config`` followed by the document as JSON (which is YAML)."""
    return "#cloud-config\n" + json.dumps(config, indent=2, sort_keys=True) + "\n"


def meta_data(hostname: str, user_data_text: str) -> dict[str, str]:
    """``instance-id`` changes with the hostname or the user-data, so cloud-init re-runs."""
    if not _HOSTNAME_RE.match(hostname):
        raise SeedError(f"bad hostname {hostname!r}: 1-63 letters, digits and inner '-'")
    digest = hashlib.sha256(f"{hostname}\n{user_data_text}".encode()).hexdigest()[:16]
    return {"instance-id": f"kvmlab-{hostname}-{digest}", "local-hostname": hostname}


def seed_files(spec: CloudInit, hostname: str) -> dict[str, str]:
    """File name -> content of the seed for ``spec`` (keys read from the host when empty)."""
    keys = list(spec.ssh_keys) if spec.ssh_keys else default_ssh_keys()
    text = render_user_data(user_data(spec, keys))
    meta = json.dumps(meta_data(hostname, text), indent=2, sort_keys=True) + "\n"
    return {META_DATA: meta, USER_DATA: text}


def write_seed(path: Path, spec: CloudInit, hostname: str) -> None:
    """Write the NoCloud seed for ``spec`` to ``path`` (mode 0600, replaced atomically)."""
    write_seed_files(path, seed_files(spec, hostname))


def write_seed_files(path: Path, files: dict[str, str]) -> None:
    """An ISO 9660 image labelled ``cidata`` holding ``files``, written to ``path`` atomically."""
    if shutil.which("genisoimage") is None:
        raise ToolMissing("genisoimage", GENISOIMAGE_INSTALL)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)  # mkstemp made it 0600; genisoimage truncates it and keeps the mode
    tmp = Path(tmp_name)
    try:
        with tempfile.TemporaryDirectory(prefix="kvmlab-seed-") as staging:
            names = []
            for name, content in sorted(files.items()):
                (Path(staging) / name).write_text(content)
                names.append(name)
            argv = [
                "genisoimage",
                "-quiet",
                "-output",
                str(tmp),
                "-volid",
                VOLUME_LABEL,
                "-joliet",
                "-rock",
                *names,
            ]
            run(
                argv,
                what=f"writing the cloud-init seed {path}",
                timeout=60,
                install=GENISOIMAGE_INSTALL,
                cwd=Path(staging),
            )
        tmp.chmod(0o600)
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)
