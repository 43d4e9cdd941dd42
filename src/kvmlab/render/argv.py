"""Collecting a QEMU command line from the parts that render themselves."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import Literal

from kvmlab.render.target import Accel


def opt_value(value: object) -> str:
    """A QEMU option value: booleans as on/off, commas doubled (QEMU's escaping)."""
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value).replace(",", ",,")


def opts(head: str, /, **props: object) -> str:
    """``opts("virtio-net-pci", netdev="n0", mq=True)`` -> ``virtio-net-pci,netdev=n0,mq=on``.

    ``None`` values are left out; ``_`` in keys becomes ``-`` unless the key
    ends with ``_`` (for QEMU properties that really contain ``_``, like
    ``rx_queue_size_``).
    """
    parts = [head] if head else []
    for key, value in props.items():
        if value is None:
            continue
        name = key[:-1] if key.endswith("_") else key.replace("_", "-")
        parts.append(f"{name}={opt_value(value)}")
    return ",".join(parts)


@dataclass
class QemuArgs:
    """The argv under construction: head options gathered from several parts, then the rest."""

    accel: Accel
    machine: Literal["q35", "pc", "microvm"]
    machine_props: dict[str, object] = field(default_factory=dict)
    cpu_model: str = "max"
    cpu_props: list[str] = field(default_factory=list)
    args: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add(self, *args: str) -> None:
        """Append options in order."""
        self.args.extend(args)

    def note(self, text: str) -> None:
        """Explain a choice the renderer made; printed as a comment above the command (once)."""
        if text not in self.notes:
            self.notes.append(text)

    @property
    def pci(self) -> bool:
        """Whether devices sit on PCI (``-pci``) or virtio-mmio (``-device``) on microvm."""
        return self.machine != "microvm"

    def virtio(self, kind: str) -> str:
        """The device name of a virtio ``kind`` on this machine: ``virtio-blk-pci``/``-device``."""
        return f"virtio-{kind}-{'pci' if self.pci else 'device'}"


@dataclass(frozen=True)
class QemuCommand:
    """A rendered QEMU invocation: argv plus the notes explaining it."""

    argv: list[str]
    notes: list[str]

    def shell(self) -> str:
        """The notes as ``#`` comments, then the command shell-quoted, one option per line."""
        lines = [f"# {n}" for n in self.notes]
        words = [shlex.quote(a) for a in self.argv]
        cmd: list[str] = [words[0]]
        for word in words[1:]:
            if word.startswith("-"):
                cmd.append(word)
            else:
                cmd[-1] += f" {word}"
        lines.append(" \\\n    ".join(cmd))
        return "\n".join(lines) + "\n"
