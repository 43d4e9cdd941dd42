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

from kvmlab.cli.app import app
from kvmlab.cli.commands import app_for  # (importing it registers every command on app)
from kvmlab.cli.groups import PipeClosed
from kvmlab.errors import KvmlabError, printable
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
    _prepare()
    try:
        with interrupting(then_ignore=True):  # SIGTERM, SIGHUP like Ctrl-C, at any moment
            status = app_for(sys.argv[1:])(standalone_mode=False)
            sys.stdout.flush()
    except KeyboardInterrupt:
        print("kvmlab: interrupted", file=sys.stderr)
        sys.exit(130)
    except (PipeClosed, BrokenPipeError):
        _quiet_exit(PIPE_CLOSED)
    except OSError as exc:
        _os_error(exc)
    except KvmlabError as exc:
        _kvmlab_error(exc)
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


def _prepare() -> None:
    """Streams to write to however kvmlab was started, and the shell's completions."""
    for name in ("stdout", "stderr"):  # started with it closed (>&-): write nowhere, quietly
        if getattr(sys, name) is None:
            setattr(sys, name, Path(os.devnull).open("w"))  # noqa: SIM115
    if COMPLETE_VAR in os.environ:  # the shell asks for completions (make deps installs them)
        from typer._completion_classes import completion_init

        completion_init()


def _os_error(exc: OSError) -> NoReturn:
    """An OS error no kvmlab code turned into its own: one line, then the exit."""
    if (failed := _output_failure(exc)) is not None:
        print(f"kvmlab: cannot write the output: {failed}", file=sys.stderr)
        _quiet_exit(3)
    print(f"kvmlab: {os_error_line(exc)}", file=sys.stderr)
    _exit_flushed(OS_ERROR_EXIT)


def _kvmlab_error(exc: KvmlabError) -> NoReturn:
    """kvmlab's own error: stdout flushed, then one ``kvmlab: `` line each, then the exit."""
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        _quiet_exit(PIPE_CLOSED)
    except OSError:  # stdout fails too (>/dev/full): the error still reaches stderr
        pass
    for line in exc.lines():
        for part in line.splitlines() or [""]:  # one line each, no escape sequence
            print(f"kvmlab: {printable(part)}", file=sys.stderr)
    _exit_flushed(exc.exit_code)


OUTPUT_ERRORS = {errno.ENOSPC, errno.EIO, errno.EBADF, errno.EFBIG, errno.EDQUOT}
"""Errors writing stdout (``>/dev/full``, a closed descriptor): one line, exit 3."""
OS_ERROR_EXIT = 3
"""An operating-system error no kvmlab code turned into its own error (a file it could not
create in a read-only run directory, a full disk): one line naming the file, exit 3."""


def _output_failure(exc: OSError) -> str | None:
    """What went wrong writing stdout, when ``exc`` is stdout's own failure, else None.

    Writing stdout raises an OSError without a file name; so does writing any open file
    (``Path.write_text`` on a full disk). It is stdout's when flushing stdout fails again
    (what it could not write stays in its buffer), or when no other file shows in the
    code that raised it (:func:`_file_written`: a large write to stdout leaves nothing
    buffered to fail again)."""
    if exc.filename is not None or exc.errno not in OUTPUT_ERRORS:
        return None
    try:
        sys.stdout.flush()
    except OSError as again:
        if again.errno in OUTPUT_ERRORS:
            return printable(again.strerror or str(again))
    except ValueError:  # stdout closed
        pass
    if _file_written(exc) is not None:
        return None
    return printable(exc.strerror or str(exc))


def os_error_line(exc: OSError) -> str:
    """``exc`` as one line: the file it names, what the system said, what to check, and
    the setting that moves kvmlab's files elsewhere when the file is one of kvmlab's."""
    what = printable(exc.strerror or str(exc) or type(exc).__name__)
    raw = exc.filename if exc.filename is not None else _file_written(exc)
    if raw is None:
        name = errno.errorcode.get(exc.errno or 0, "")
        return (
            f"{what}{f' ({name})' if name else ''}; check free space and permissions where "
            "kvmlab writes (KVMLAB_RUN_DIR, KVMLAB_CACHE, KVMLAB_RESULTS)"
        )
    path = os.fsdecode(raw) if isinstance(raw, (str, bytes)) else str(raw)
    setting = _setting_for(path)
    advice, moved = _ADVICE.get(exc.errno or 0, ("check it and its file system", "elsewhere"))
    also = f", or set {setting} to a place {moved}" if setting else ""
    return f"{printable(path)}: {what}; {advice}{also}"


def _file_written(exc: OSError) -> str | None:
    """The file an OSError without a file name came from, when the code that raised it
    shows it: reading or writing an open file (``Path.write_text`` on a full disk) raises
    one nameless. Only the innermost frame is asked: the ``Path`` whose method it is, else
    the one open file among its variables."""
    import io
    from pathlib import PurePath

    tb = exc.__traceback__
    if tb is None:
        return None
    while tb.tb_next is not None:
        tb = tb.tb_next
    names = tb.tb_frame.f_locals
    if isinstance(owner := names.get("self"), PurePath):
        return str(owner)
    standard = {id(f) for f in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__)}
    opened = (
        getattr(v, "name", None)
        for v in names.values()
        if isinstance(v, io.IOBase) and id(v) not in standard
    )
    files = {
        os.fsdecode(name)
        for name in opened
        if isinstance(name, (str, bytes)) and not os.fsdecode(name).startswith("<")
    }
    return files.pop() if len(files) == 1 else None


_ADVICE = {
    errno.EROFS: ("its file system is mounted read-only", "on a writable one"),
    errno.ENOSPC: ("its file system is full: free space there", "on another one"),
    errno.EDQUOT: ("your disk quota there is used up: free space", "on another file system"),
    errno.EACCES: ("check the permissions of it and of its directories", "of your own"),
    errno.EPERM: ("check the permissions of it and of its directories", "of your own"),
    errno.ENOENT: ("it or a directory on its path does not exist", "that exists"),
    errno.ENOTDIR: ("a part of its path is not a directory", "that is a directory"),
    errno.EISDIR: ("it is a directory, not a file", "elsewhere"),
}
"""errno: (what to check, where the setting should point instead)."""


def _setting_for(path: str) -> str | None:
    """The environment variable that places ``path`` (one of kvmlab's own files or
    directories), or None."""
    target = Path(os.path.normpath(path))
    for var in ("KVMLAB_TUNING_STATE", "KVMLAB_RESULTS"):  # files: theirs are beside them
        if value := os.environ.get(var):
            named = Path(os.path.normpath(value))
            if target in (named, named.parent) or target.parent == named.parent:
                return var
    from kvmlab.guest.cache import default_root
    from kvmlab.paths import data_dir, run_root

    places: list[tuple[str, Path]] = []
    for var, where in (
        ("KVMLAB_RUN_DIR", run_root),
        ("KVMLAB_CACHE", default_root),
        ("XDG_DATA_HOME", data_dir),
    ):
        with contextlib.suppress(Exception):  # a setting kvmlab refuses names no place
            places.append((var, Path(os.path.normpath(where()))))
    for var, place in places:  # the place itself or something in it
        if target == place or place in target.parents:
            return var
    for var, place in places:  # a directory on the way to a place the user set
        if os.environ.get(var) and target in place.parents and target != Path("/"):
            return var
    return None


def _exit_flushed(status: int) -> NoReturn:
    """Exit with ``status``; output stdout can no longer take is dropped quietly."""
    try:
        sys.stdout.flush()
    except (OSError, ValueError):
        _quiet_exit(status)
    sys.exit(status)


def _quiet_exit(status: int) -> NoReturn:
    """Exit without Python complaining about output it can no longer flush."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    with contextlib.suppress(OSError, ValueError):
        os.dup2(devnull, sys.stdout.fileno())
    sys.exit(status)


_LIBRARY_WORDS = (
    (re.compile(r"\S+ is not in the range (\S+?)<=x<=(\S+?)\."), r"give a number from \1 to \2"),
    (re.compile(r"\S+ is not a valid int(eger| range)\."), "give a whole number"),
    (re.compile(r"\S+ is not a valid float( range)?\."), "give a number"),
)
"""The argument parser's phrases (click's, inside typer) in kvmlab's words, each saying what
to give (the one ranged option, --tcp-port, has both bounds)."""


def plain_words(message: str) -> str:
    """``message`` with the argument parser's phrases in kvmlab's words."""
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
