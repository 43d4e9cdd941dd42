"""The kvmlab exception tree.

Every error kvmlab raises on purpose derives from :class:`KvmlabError` and
carries what a user needs to act on it. Only the CLI catches these and prints
them; the ``exit_code`` of each class is the process exit status it maps to.

Exit codes:
    1  a check failed (doctor found a failing check)
    2  bad input: a lab file, a command-line argument
    3  a component failed at run time (QEMU, a tool) or a required tool is missing
    4  the host cannot do what was asked (no KVM, no hugepages, ...)
    5  a migration completed but its guest failed verification (``kvmlab migrate``)
    130 interrupted (Ctrl-C, SIGTERM, SIGHUP)
    141 stdout's reader went away (a closed pipe)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path


class KvmlabError(Exception):
    """Root of every error kvmlab raises on purpose."""

    exit_code: int = 1

    def lines(self) -> list[str]:
        """The message as the lines the CLI prints."""
        return [str(self)]


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a lab file: where it is and what is wrong."""

    file: str
    path: str
    message: str

    def __str__(self) -> str:
        where = f"{self.file}: {self.path}" if self.path else self.file
        return printable(f"{where}: {self.message}")


def printable(text: str) -> str:
    """``text`` with control characters escaped (``\\n``, ``\\x1b``): a key or value from a
    file never splits an error line or reaches the terminal as an escape sequence."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


class SpecError(KvmlabError):
    """A lab file is missing, unreadable, not TOML, or not a valid lab."""

    exit_code = 2

    def __init__(self, problems: Sequence[Problem]) -> None:
        self.problems = list(problems)
        super().__init__("\n".join(str(p) for p in self.problems))

    def lines(self) -> list[str]:
        return [str(p) for p in self.problems]


class UsageError(KvmlabError):
    """A command-line argument names something that does not exist or does not fit."""

    exit_code = 2


class RenderError(KvmlabError):
    """A valid spec that the chosen backend cannot express."""

    exit_code = 2

    def __init__(self, guest: str, message: str) -> None:
        self.guest = guest
        super().__init__(f"guest {guest}: {message}")


class HostError(KvmlabError):
    """The host lacks something the request needs; ``fix`` says how to get it."""

    exit_code = 4

    def __init__(self, message: str, fix: Sequence[str] = ()) -> None:
        self.fix = list(fix)
        super().__init__(message)

    def lines(self) -> list[str]:
        return [str(self), *(f"  fix: {f}" for f in self.fix)]


class ToolMissing(KvmlabError):
    """An external program kvmlab needs is not installed."""

    exit_code = 3

    def __init__(self, tool: str, install: str) -> None:
        self.tool = tool
        self.install = install
        super().__init__(f"{tool} is not installed; install it with: {install}")


@dataclass
class ProcessFailure(KvmlabError):
    """An external process (QEMU, a tool) failed; carries argv, exit code and log tail."""

    what: str
    argv: list[str]
    returncode: int | None
    log_tail: list[str] = field(default_factory=list)
    log_path: Path | None = None

    exit_code = 3

    def __post_init__(self) -> None:
        super().__init__(self.what)

    def lines(self) -> list[str]:
        import shlex

        out = [self.what, f"  command: {shlex.join(self.argv)}"]
        if self.returncode is not None:
            out.append(f"  exit code: {self.returncode}")
        if self.log_path is not None:
            out.append(f"  log: {self.log_path}")
        out.extend(f"  | {line}" for line in self.log_tail)
        return out


class RuntimeFailure(KvmlabError):
    """A guest or its control channel misbehaved at run time."""

    exit_code = 3


class QmpFailure(RuntimeFailure):
    """A QMP connection or command failed."""


class StateError(KvmlabError):
    """An operation that does not fit the guest's or lab's state (e.g. exec on a stopped guest)."""

    exit_code = 2


class Regression(KvmlabError):
    """A compared run is significantly worse than its base past the gate CI set
    (``kvmlab report BASE --compare NEW --fail-on-regression PCT``)."""

    exit_code = 6


class Interrupted(KvmlabError):
    """Ctrl-C (SIGINT) or SIGTERM arrived; everything started was cleaned up."""

    exit_code = 130
