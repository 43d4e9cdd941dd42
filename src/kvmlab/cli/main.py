"""``kvmlab``: the entry point, and the one place errors become exit codes.

The commands live in :mod:`kvmlab.cli.commands` (one module per group); heavy modules are
imported inside them, so ``kvmlab --help`` stays fast, and only the command that runs is
built (:func:`kvmlab.cli.commands.app_for`).
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import sys
from pathlib import Path
from typing import Any, NoReturn

import typer

from kvmlab.cli.app import PipeClosed, app
from kvmlab.cli.commands import app_for  # (importing it registers every command on app)
from kvmlab.errors import KvmlabError
from kvmlab.proc.signals import interrupting

__all__ = ["app", "main"]

COMPLETE_VAR = "_KVMLAB_COMPLETE"
"""Set by the shell's completion script (``_KVMLAB_COMPLETE=source_bash kvmlab`` prints it)."""
PIPE_CLOSED = 141
"""Exit status when the reader of stdout went away (128 + SIGPIPE, as a shell reports it)."""


def main() -> None:
    """Console-script entry point: run the app, print kvmlab errors, exit with their code.

    Usage errors (bad arguments) are one line unless stderr is a terminal, exit 2; kvmlab's
    own errors are printed here, one ``kvmlab: `` line each; a closed stdout pipe ends
    quietly with :data:`PIPE_CLOSED`. rich and typer end a closed pipe with
    ``SystemExit(1)``; kvmlab itself never exits (its status 1 is returned), so that is
    what such an exit means here.
    """
    for name in ("stdout", "stderr"):  # started with it closed (>&-): write nowhere, quietly
        if getattr(sys, name) is None:
            setattr(sys, name, Path(os.devnull).open("w"))  # noqa: SIM115
    if COMPLETE_VAR in os.environ:  # the shell asks for completions (make deps installs them)
        from typer._completion_classes import completion_init

        completion_init()
    try:
        with interrupting(then_ignore=True):  # SIGTERM, SIGHUP like Ctrl-C, at any moment
            status = app_for(sys.argv[1:])(standalone_mode=False)
            sys.stdout.flush()
    except KeyboardInterrupt:
        print("kvmlab: interrupted", file=sys.stderr)
        sys.exit(130)
    except OSError as exc:
        if exc.errno not in OUTPUT_ERRORS:
            raise
        print(f"kvmlab: cannot write the output: {exc.strerror}", file=sys.stderr)
        _quiet_exit(3)
    except KvmlabError as exc:
        try:
            sys.stdout.flush()
        except BrokenPipeError:
            _quiet_exit(PIPE_CLOSED)
        for line in exc.lines():
            print(f"kvmlab: {line}", file=sys.stderr)
        sys.exit(exc.exit_code)
    except (PipeClosed, BrokenPipeError):
        _quiet_exit(PIPE_CLOSED)
    except SystemExit as exc:
        if exc.code == 1:
            _quiet_exit(PIPE_CLOSED)
        raise
    except typer.Abort:
        sys.exit(130)
    except Exception as exc:
        if not any(k.__name__ == "ClickException" for k in type(exc).__mro__):
            raise
        _usage_error(exc)
    sys.exit(status if isinstance(status, int) else 0)


OUTPUT_ERRORS = {errno.ENOSPC, errno.EIO, errno.EBADF, errno.EFBIG, errno.EDQUOT}
"""Errors writing stdout (``>/dev/full``, a closed descriptor): one line, exit 3."""


def _quiet_exit(status: int) -> NoReturn:
    """Exit without Python complaining about output it can no longer flush."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    with contextlib.suppress(OSError, ValueError):
        os.dup2(devnull, sys.stdout.fileno())
    sys.exit(status)


_LIBRARY_WORDS = (
    (
        re.compile(r"Input should be greater than or equal to (\S+)"),
        r"give a number of at least \1",
    ),
    (re.compile(r"Input should be greater than (\S+)"), r"give a number above \1"),
    (re.compile(r"Input should be less than or equal to (\S+)"), r"give a number of at most \1"),
    (re.compile(r"Input should be less than (\S+)"), r"give a number below \1"),
    (re.compile(r"Input should be a valid integer[^.;]*"), "give a whole number"),
    (re.compile(r"Input should be a valid number[^.;]*"), "give a number"),
)
"""The validation library's phrases (typer checks option values with pydantic) in
kvmlab's words, each saying what to give."""


def plain_words(message: str) -> str:
    """``message`` with the validation library's phrases in kvmlab's words."""
    for pattern, words in _LIBRARY_WORDS:
        message = pattern.sub(words, message)
    return message


def _usage_error(exc: Any) -> NoReturn:
    """A bad command line: typer's box on a terminal, else one ``kvmlab:`` line; exit 2."""
    if type(exc).__name__ != "NoArgsIsHelpError":  # that one printed the help already
        if sys.stderr.isatty():
            from typer import rich_utils

            rich_utils.rich_format_error(exc)
        else:
            message = plain_words(" ".join(str(exc.format_message()).split()))
            ctx = getattr(exc, "ctx", None)
            hint = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
            print(f"kvmlab: {message}{hint}", file=sys.stderr)
    sys.exit(2)
