"""Errors of the guest runtime (image building and the guest-agent channel).

Tree::

    KvmlabError
    └── GuestError                 anything in kvmlab.guest (exit code 3)
        ├── ImageError             the default guest image cannot be built
        └── AgentError             the guest agent channel failed
            ├── AgentConnectError  the agent socket cannot be reached or was closed
            ├── AgentTimeout       no answer in time
            │   └── GuestExecTimeout   a guest-exec'd command outlived its timeout
            ├── AgentProtocolError the agent said something that is not its protocol
            ├── AgentCommandError  the agent answered with an error object
            ├── AgentStateError    the client was used in the wrong state
            ├── GuestCommandFailed a command run with check=True exited non-zero
            ├── GuestOutputTruncated  qemu-ga kept only the first 16 MiB of an output
            └── GuestInputTooLarge    more input than one guest-exec request carries (exit 2)

    KeyboardInterrupt
    └── GuestExecInterrupted   interrupted while a guest command ran; it was killed (or not)

Subprocess failures (apt-get, dpkg, busybox) are :class:`kvmlab.errors.ProcessFailure`
and missing tools are :class:`kvmlab.errors.ToolMissing`, as everywhere in kvmlab.
"""

from __future__ import annotations

from collections.abc import Sequence

from kvmlab.errors import KvmlabError

MIB = 1024 * 1024


def _ended(returncode: int) -> str:
    return f"was killed by signal {-returncode}" if returncode < 0 else f"exited with {returncode}"


class GuestError(KvmlabError):
    """Root of the errors raised by kvmlab.guest."""

    exit_code = 3


class ImageError(GuestError):
    """The guest image (kernel, initramfs) cannot be built from what the host has."""


class AgentError(GuestError):
    """Talking to the QEMU guest agent failed."""


class AgentConnectError(AgentError):
    """The agent's unix socket cannot be connected to, or it closed under us."""


class AgentTimeout(AgentError):
    """The agent did not answer within the timeout."""


class GuestExecTimeout(AgentTimeout):
    """A command started with guest-exec did not exit within its timeout."""

    def __init__(self, argv: Sequence[str], timeout: float, pid: int) -> None:
        self.argv = list(argv)
        self.timeout = timeout
        self.pid = pid
        super().__init__(
            f"guest command {self.argv!r} (guest pid {pid}) still running after {timeout:g}s"
        )


class AgentProtocolError(AgentError):
    """The agent sent something that is not a well-formed answer."""


class AgentCommandError(AgentError):
    """The agent answered a command with an error object."""

    def __init__(self, command: str, error_class: str, desc: str) -> None:
        self.command = command
        self.error_class = error_class
        self.desc = desc
        super().__init__(f"guest agent command {command} failed: {error_class}: {desc}")


class AgentStateError(AgentError):
    """The client was asked to do something its state does not allow (e.g. exec after close)."""


class GuestCommandFailed(AgentError):
    """A guest command run with ``check=True`` exited non-zero."""

    def __init__(self, argv: Sequence[str], returncode: int, stderr: bytes) -> None:
        self.argv = list(argv)
        self.returncode = returncode
        self.stderr = stderr
        super().__init__(f"guest command {self.argv!r} exited with {returncode}")

    def lines(self) -> list[str]:
        tail = self.stderr.decode(errors="replace").splitlines()[-10:]
        return [str(self), *(f"  | {line}" for line in tail)]


class GuestOutputTruncated(AgentError):
    """qemu-ga keeps at most ``limit`` bytes of a command's stdout and of its stderr."""

    def __init__(
        self, argv: Sequence[str], returncode: int, streams: Sequence[str], limit: int
    ) -> None:
        self.argv = list(argv)
        self.returncode = returncode
        self.streams = list(streams)
        self.limit = limit
        super().__init__(
            f"guest command {self.argv!r} wrote more than {limit / MIB:g} MiB to "
            f"{' and '.join(self.streams)}; the guest agent keeps only the first {limit} bytes "
            f"of each (passed on); the command {_ended(returncode)}"
        )

    def lines(self) -> list[str]:
        return [
            str(self),
            "  fix: write it to a file in the guest (sh -c 'CMD > /tmp/out') and read that in "
            f"parts under {self.limit / MIB:g} MiB (dd if=/tmp/out bs=1M skip=16 count=16)",
        ]


class GuestInputTooLarge(GuestError):
    """More input for a guest command than one guest-exec request can carry."""

    exit_code = 2

    def __init__(self, size: int, limit: int) -> None:
        self.size = size
        self.limit = limit
        super().__init__(
            f"input for the guest command is over {limit / MIB:g} MiB ({size} bytes or more), "
            "more than the guest agent takes in one request (for a guest booting the default "
            "image, pass a path instead: it sees the host's files, except /tmp, read-only)"
        )


class GuestExecInterrupted(KeyboardInterrupt):
    """Ctrl-C (or SIGTERM, SIGHUP) arrived while a guest command ran; it was sent SIGKILL.

    A ``KeyboardInterrupt``, so code that cleans up on Ctrl-C still sees one; ``killed``
    says whether the command was seen to end.
    """

    def __init__(self, argv: Sequence[str], pid: int, killed: bool) -> None:
        self.argv = list(argv)
        self.pid = pid
        self.killed = killed
        what = f"guest command {self.argv!r} (guest pid {pid})"
        super().__init__(
            f"{what} was killed" if killed else f"{what} could not be killed; it may still run"
        )
