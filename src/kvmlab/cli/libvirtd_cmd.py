"""``kvmlab libvirtd start|stop|list``: private libvirt daemons (never the system one)."""

from __future__ import annotations

import json
from typing import Annotated

import typer

libvirtd_app = typer.Typer(
    help="Private libvirt daemons for the libvirt backend (the system libvirtd is never "
    "started or changed by kvmlab).",
    no_args_is_help=True,
)


@libvirtd_app.command("start")
def start(
    name: Annotated[str, typer.Argument(help="Name of the daemon (e.g. host2).")],
    tcp_port: Annotated[
        int | None,
        typer.Option(
            "--tcp-port",
            min=1024,
            max=65535,
            help="Also listen on 127.0.0.1:PORT without authentication (a stand-in "
            "for a remote host; any local user can then drive it, as root).",
        ),
    ] = None,
    listen: Annotated[
        str,
        typer.Option(
            "--listen",
            help="With --tcp-port: the address to listen on instead of 127.0.0.1 "
            "(anyone who reaches it drives the daemon as root: a lab network only).",
        ),
    ] = "127.0.0.1",
    netns: Annotated[
        str | None,
        typer.Option(
            "--netns",
            help="With --tcp-port: run in this network namespace (ip netns add NAME), a "
            "second 'host' reached only over the network; --listen an address of it.",
        ),
    ] = None,
) -> None:
    """Start a private libvirtd in its own mount namespace; print its URIs."""
    from kvmlab.runtime.libvirt import private

    daemon = private.start(name, tcp_port, listen, netns)
    print(daemon.uri)
    if daemon.tcp_uri:
        print(daemon.tcp_uri)
    if daemon.kvm_hidden:
        typer.echo(
            f"note: {daemon.kvm_hidden}; this daemon has a /dev/kvm of its own that it "
            "can open (for the system libvirtd: chgrp kvm /dev/kvm)",
            err=True,
        )


@libvirtd_app.command("stop")
def stop(name: Annotated[str, typer.Argument(help="Name of the daemon.")]) -> None:
    """Destroy the private daemon's domains, stop it and remove its state."""
    from kvmlab.runtime.libvirt import private

    if not private.stop(name):
        typer.echo(f"private libvirtd {name} was not running (its state is removed)", err=True)


@libvirtd_app.command("list")
def list_(
    output: Annotated[str, typer.Option("--output", "-o", help="text or json.")] = "text",
) -> None:
    """The private daemons on record, with their URIs."""
    from kvmlab.runtime.libvirt import private

    rows = [
        {
            "name": d.name,
            "running": d.running(),
            "pid": d.pid,
            "uri": d.uri,
            "tcp_uri": d.tcp_uri,
            "netns": d.netns,
        }
        for d in private.running()
    ]
    if output == "json":
        print(json.dumps(rows, indent=2))
        return
    for row in rows:
        state = "running" if row["running"] else "dead"
        print(f"{row['name']}\t{state}\t{row['uri']}\t{row['tcp_uri'] or ''}")
