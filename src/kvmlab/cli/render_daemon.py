"""``kvmlab render -o libvirt``'s side that talks to libvirt: the daemon's
capabilities, the image published to it, and what the printed domain needs from its host."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

from kvmlab.render.libvirt_caps import LibvirtCaps
from kvmlab.render.target import Target
from kvmlab.spec import Guest, LoadedLab


def capabilities_at(connect: str | None) -> LibvirtCaps:
    """What the libvirt at ``connect`` offers; without a URI, the installed library's
    version with nothing newer assumed."""
    if connect is None:
        import libvirt

        return LibvirtCaps.assumed(libvirt.getVersion())
    from kvmlab.runtime.libvirt.conn import capabilities, connected
    from kvmlab.spec.backend import uri_option

    with connected(uri_option(connect, "--connect")) as conn:
        return capabilities(conn)


def published(target: Target, guest: Guest, connect: str, name: str) -> Target:
    """``target`` with the default image (and the guest's cloud-init seed) uploaded into
    kvmlab's pool on the daemon at ``connect``, as ``kvmlab up --backend libvirt`` does.

    The volumes stay while a domain of that daemon names them; kvmlab deletes them with
    its next libvirt clean-up once none does."""
    import contextlib
    import secrets
    import tempfile

    from kvmlab.guest.cloudinit import write_seed
    from kvmlab.runtime.libvirt.conn import connected
    from kvmlab.runtime.libvirt.publish import (
        publish,
        publish_seed,
        publishing,
        unpublish_unused,
    )

    with connected(connect) as conn, publishing():
        try:
            if target.image is not None and target.image.kernel.exists():
                image = target.image
                where = publish(conn, connect, [image.kernel, image.initrd])
                image = replace(image, kernel=where[image.kernel], initrd=where[image.initrd])
                target = replace(target, image=image)
            if guest.cloud_init is not None:
                with tempfile.TemporaryDirectory(prefix="kvmlab-seed-") as tmp:
                    seed = Path(tmp) / "cidata.img"
                    write_seed(seed, guest.cloud_init, hostname=name)
                    token = secrets.token_hex(12)
                    seed_image = publish_seed(conn, connect, seed, token)
                    target = replace(target, seed_image=seed_image)
        except BaseException:  # Ctrl-C or a failed upload: no half-made volume stays
            with contextlib.suppress(Exception):
                unpublish_unused(conn)
            raise
    return target


def say_needs(
    loaded: LoadedLab, guest: Guest, target: Target, caps: LibvirtCaps, connect: str | None
) -> None:
    """One stderr line for each thing the printed domain needs from its host."""
    from kvmlab.runtime.libvirt.conn import is_local
    from kvmlab.runtime.libvirt.printed import findings

    accel, _ = target.accel_for(guest)
    local = connect is None or is_local(connect)
    found = findings(
        guest.under(accel), target, caps, local=local, connect=connect, lab_file=str(loaded.path)
    )
    for finding in found:
        print(finding.line("/".join(target.address)), file=sys.stderr)
