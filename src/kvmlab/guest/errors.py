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
            └── GuestCommandFailed a command run with check=True exited non-zero

Subprocess failures (apt-get, dpkg, busybox) are :class:`kvmlab.errors.ProcessFailure`
and missing tools are :class:`kvmlab.errors.ToolMissing`, as everywhere in kvmlab.
"""

from __future__ import annotations

from collections.abc import Sequence

from kvmlab.errors import KvmlabError


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
