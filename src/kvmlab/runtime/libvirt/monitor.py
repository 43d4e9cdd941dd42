"""A libvirt domain's QEMU monitor, through libvirt's passthrough
(``virDomainQemuMonitorCommand``, what ``virsh qemu-monitor-command`` does): libvirt owns
the QMP socket and notes each domain a client spoke to this way as tainted
(``custom-monitor`` in its log)."""

from __future__ import annotations

import json
from typing import Any

import libvirt
import libvirt_qemu

from kvmlab.runtime.libvirt.conn import LibvirtFailure, describe
from kvmlab.runtime.monitor import Monitor


class LibvirtMonitor(Monitor):
    """The monitor of domain ``dom`` (a ``virDomain``) of the daemon at ``uri``."""

    def __init__(self, dom: Any, uri: str, name: str) -> None:
        self.dom, self.uri, self.name = dom, uri, name

    def execute(
        self, command: str, args: dict[str, Any] | None = None, timeout: float = 30.0
    ) -> Any:
        """A QMP command through libvirt (which bounds the wait itself: ``timeout`` is not
        passed on); its ``return`` value, or a :class:`LibvirtFailure`."""
        request: dict[str, Any] = {"execute": command}
        if args:
            request["arguments"] = args
        try:
            raw = libvirt_qemu.qemuMonitorCommand(self.dom, json.dumps(request), 0)
        except libvirt.libvirtError as exc:
            raise LibvirtFailure(f"QMP {command}: {describe(exc)}", self.uri, self.name) from None
        try:
            answer = json.loads(raw)
        except (TypeError, ValueError):
            raise LibvirtFailure(
                f"QMP {command}: not JSON: {str(raw)[:200]!r}", self.uri, self.name
            ) from None
        if isinstance(answer, dict) and "return" in answer:
            return answer["return"]
        error = answer.get("error", {}) if isinstance(answer, dict) else {}
        desc = error.get("desc") if isinstance(error, dict) else None
        raise LibvirtFailure(
            f"QMP {command}: {desc or f'answer without return: {str(raw)[:200]!r}'}",
            self.uri,
            self.name,
        )

    def human(self, command: str) -> str:
        """An HMP command line, which libvirt wraps in ``human-monitor-command`` itself."""
        try:
            return str(
                libvirt_qemu.qemuMonitorCommand(
                    self.dom, command, libvirt_qemu.VIR_DOMAIN_QEMU_MONITOR_COMMAND_HMP
                )
            )
        except libvirt.libvirtError as exc:
            raise LibvirtFailure(f"HMP {command!r}: {describe(exc)}", self.uri, self.name) from None
