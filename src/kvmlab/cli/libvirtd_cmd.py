"""``kvmlab libvirtd start|stop|list``: private libvirt daemons (never the system one)."""

from __future__ import annotations

from typing import Annotated

import typer

from kvmlab.cli.groups import command_group
from kvmlab.cli.options import OutputOpt

libvirtd_app = command_group(
    "Private libvirt daemons for the libvirt backend (the system libvirtd is never "
    "started or changed by kvmlab)."
)


TcpPortOpt = Annotated[
    int | None,
    typer.Option(
        "--tcp-port",
        min=1024,
        max=65535,
        help="Also listen on 127.0.0.1:PORT without authentication (a stand-in "
        "for a remote host; any local user can then drive it, as root).",
    ),
]
ListenOpt = Annotated[
    str,
    typer.Option(
        "--listen",
        help="With --tcp-port: the address to listen on instead of 127.0.0.1 "
        "(anyone who reaches it drives the daemon as root: a lab network only).",
    ),
]
NetnsOpt = Annotated[
    str | None,
    typer.Option(
        "--netns",
        help="With --tcp-port: run in this network namespace (ip netns add NAME), a "
        "second 'host' reached only over the network; --listen an address of it.",
    ),
]


@libvirtd_app.command("start")
def start(
    name: Annotated[str, typer.Argument(help="Name of the daemon (e.g. host2).")],
    tcp_port: TcpPortOpt = None,
    listen: ListenOpt = "127.0.0.1",
    netns: NetnsOpt = None,
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

    done = private.stop(name)
    if done.record_problem:
        typer.echo(f"note: {done.record_problem}", err=True)
    if done.was_running:
        return
    if done.record_pid:
        why = f"its record's pid {done.record_pid} is gone or another program's: not signalled"
    else:
        why = "nothing was signalled"
    if done.leftovers:
        why += f"; stopped {done.leftovers} QEMU process(es) it left"
    typer.echo(f"private libvirtd {name} was not running ({why}); its state is removed", err=True)


@libvirtd_app.command("list")
def list_(output: OutputOpt = "text") -> None:
    """The private daemons on record, with their URIs (a record kvmlab cannot read is
    listed as unreadable, with why)."""
    from kvmlab.cli.options import output_choice

    output_choice(output, "text", "json")
    rows = _daemon_rows()
    if output == "json":
        from kvmlab.cli.jsonout import emit

        emit("libvirtd", {"daemons": rows})
        return
    if not rows:
        print("no private libvirtd on record (kvmlab libvirtd start NAME starts one)")
        return
    _print_daemons(rows)


def _daemon_rows() -> list[dict[str, object]]:
    """Each private daemon on record, or why its record is unreadable."""
    from kvmlab.runtime.libvirt import private

    rows: list[dict[str, object]] = []
    for d in private.running():
        if isinstance(d, private.DaemonRecordError):
            rows.append({"name": d.name, "state": "unreadable", "problem": str(d)})
            continue
        rows.append(
            {
                "name": d.name,
                "state": "running" if d.running() else "dead",
                "pid": d.pid,
                "uri": d.uri,
                "tcp_uri": d.tcp_uri,
                "netns": d.netns,
            }
        )
    return rows


def _print_daemons(rows: list[dict[str, object]]) -> None:
    from kvmlab.errors import printable

    table = [("NAME", "STATE", "URI", "TCP URI")]
    for row in rows:
        if row["state"] == "unreadable":
            table.append((str(row["name"]), "unreadable", str(row["problem"]), ""))
        else:
            table.append(
                (str(row["name"]), str(row["state"]), str(row["uri"]), str(row["tcp_uri"] or "-"))
            )
    widths = [max(len(r[i]) for r in table) for i in range(3)]
    for r in table:
        print(
            printable(
                "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=False)) + "  " + r[3]
            ).rstrip()
        )
