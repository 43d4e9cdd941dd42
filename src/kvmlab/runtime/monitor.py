"""A guest's QEMU monitor as the guest contract lends it: QMP commands, and the few things
only HMP does (a user network's port forwards), said by what they do.

Every backend gives one (kvmlab's QEMU: its QMP socket; libvirt: the daemon's monitor
passthrough); callers never compose HMP command lines themselves.
"""

from __future__ import annotations

import abc
from typing import Any


class Monitor(abc.ABC):
    """One guest's monitor: run a QMP command, get its ``return`` value."""

    @abc.abstractmethod
    def execute(
        self, command: str, args: dict[str, Any] | None = None, timeout: float = 30.0
    ) -> Any:
        """Run a QMP command; its ``return`` value (a failure raises a ``KvmlabError``)."""

    def human(self, command: str) -> str:
        """An HMP command line (what QMP has no command for); what it printed."""
        return str(self.execute("human-monitor-command", {"command-line": command}))

    def add_forward(self, netdev: str, rule: str) -> None:
        """A host port forward on user netdev ``netdev``; ``rule`` as ``hostfwd`` takes it
        (``udp:127.0.0.1:5000-:7777``). QEMU reports a failed bind only on its stderr:
        :meth:`forwarding` tells whether it took."""
        self.human(f"hostfwd_add {netdev} {rule}")

    def remove_forward(self, netdev: str, host: str) -> None:
        """Remove the forward of ``netdev`` listening at ``host`` (``udp:ADDRESS:PORT``)."""
        self.human(f"hostfwd_remove {netdev} {host}")

    def forwarding(self, host_port: str) -> bool:
        """Whether a host forward of the guest's user networks listens on ``host_port``."""
        return forwarded(self.human("info usernet"), host_port)


def forwarded(usernet: str, host_port: str) -> bool:
    """Whether ``info usernet`` lists a host forward listening on ``host_port``."""
    for line in usernet.splitlines():
        cols = line.split()
        # TCP[HOST_FORWARD]  FD  SRC-ADDR  SRC-PORT  DST-ADDR  DST-PORT  RecvQ  SendQ
        if len(cols) >= 4 and "HOST_FORWARD" in cols[0] and cols[3] == host_port:
            return True
    return False
