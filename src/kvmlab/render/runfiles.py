"""The files of a guest's run directory that its QEMU command line names (sockets, logs),
and the longest path a socket may have.

Apart from the renderers, which name them, so that ``kvmlab ps`` and the other commands
that only read a run directory import neither renderer nor any lab model.
"""

from __future__ import annotations

UNIX_PATH_MAX = 107
"""The longest path a unix socket can bind (sun_path is 108 bytes with its NUL)."""

QMP_SOCKET = "qmp.sock"
CONSOLE_SOCKET = "console.sock"
SERIAL_LOG = "serial.log"
AGENT_SOCKET = "qga.sock"
PID_FILE = "qemu.pid"
PROBE_LOG = "probe.log"
"""A migratable guest's heartbeat channel: kvmlab-dirty writes a line every 10 ms of guest
time, QEMU appends it to this file, and the host times the arrivals (guest downtime)."""
RELAY_SOCKET = "relay-{}.sock"
"""A guest hypervisor's extra agent channels: one per guest inside it, bridged there to that
guest's agent socket, so the host reaches every level's agent without a process per call."""
