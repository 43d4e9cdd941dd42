"""Manual pages generated from the help text: ``kvmlab(1)`` and ``kvmlab-COMMAND(1)`` for each
command (``kvmlab-tune-apply(1)`` for a group's), so ``man kvmlab-migrate`` says what
``kvmlab migrate --help`` says. ``python -m kvmlab.cli.manpages DIR`` writes them (``make
deps`` installs them under /usr/local/share/man/man1)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from datetime import date
from pathlib import Path
from typing import Any

from kvmlab import __version__

SECTION = "1"


def _escape(text: str) -> str:
    """Text for roff: backslashes and hyphens escaped, a leading dot or quote guarded."""
    out = text.replace("\\", "\\e").replace("-", "\\-")
    return "\\&" + out if out.startswith((".", "'")) else out


def _plain(text: str) -> str:
    """Help text without its Markdown (code spans) and rich escapes."""
    return text.replace("`", "").replace("\\[", "[")


def _paragraphs(help_text: str) -> list[str]:
    """A docstring's paragraphs, each joined into one line."""
    blocks = [b.strip() for b in _plain(help_text).strip().split("\n\n")]
    return [" ".join(line.strip() for line in b.splitlines()) for b in blocks if b]


def commands(group: Any, prefix: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    """Every visible command under ``group`` with its path of names (``("tune", "apply")``)."""
    for name in sorted(group.commands):
        command = group.commands[name]
        if command.hidden:
            continue
        path = (*prefix, name)
        if hasattr(command, "commands"):
            yield from commands(command, path)
        else:
            yield path, command


def _option_rows(command: Any, ctx: Any) -> Iterator[tuple[str, str]]:
    for param in command.params:
        if getattr(param, "hidden", False):
            continue
        record = param.get_help_record(ctx)
        if record is None:
            continue
        names, help_text = record
        yield names, help_text


def page(path: tuple[str, ...], command: Any, today: str) -> str:
    """One command's page, in roff (man(7))."""
    import typer

    full = " ".join(("kvmlab", *path))
    title = "-".join(("kvmlab", *path))
    ctx = typer.Context(command, info_name=full)
    paragraphs = _paragraphs(command.help or "")
    summary = paragraphs[0] if paragraphs else ""
    usage = " ".join(command.collect_usage_pieces(ctx))
    lines = [
        f'.TH "{title.upper()}" "{SECTION}" "{today}" "kvmlab {__version__}" "kvmlab manual"',
        ".SH NAME",
        f"{_escape(title)} \\- {_escape(summary)}",
        ".SH SYNOPSIS",
        f".B {_escape(full)}",
        _escape(usage),
        ".SH DESCRIPTION",
    ]
    for paragraph in paragraphs:
        lines += [".PP", _escape(paragraph)]
    rows = list(_option_rows(command, ctx))
    if rows:
        lines.append(".SH OPTIONS")
        for names, help_text in rows:
            text = " ".join(_plain(help_text).split())
            lines += [".TP", f"\\fB{_escape(names)}\\fR", _escape(text)]
    lines += [
        ".SH EXIT STATUS",
        "0 success, 1 a check failed, 2 bad input, 3 a component failed, 4 the host lacks "
        "something, 5 a migrated guest failed verification, 130 interrupted, 141 the reader "
        "of stdout went away.",
        ".SH SEE ALSO",
        "\\fBkvmlab\\fR(1); docs/cli.md and the README in kvmlab's source tree.",
    ]
    return "\n".join(lines) + "\n"


def overview(group: Any, today: str) -> str:
    """``kvmlab(1)``: what kvmlab is and every command with its one-line summary."""
    lines = [
        f'.TH "KVMLAB" "{SECTION}" "{today}" "kvmlab {__version__}" "kvmlab manual"',
        ".SH NAME",
        f"kvmlab \\- {_escape(_paragraphs(group.help or '')[0])}",
        ".SH SYNOPSIS",
        ".B kvmlab",
        "COMMAND [OPTIONS] [ARGS]...",
        ".SH DESCRIPTION",
        ".PP",
        _escape(
            "A LAB is a lab file or the name of a lab shipped with kvmlab (kvmlab labs lists "
            "them); LAB/GUEST is a running guest (basic/vm1, nested/l1/l2). Every command "
            "takes --help; each has a page of its own: man kvmlab-COMMAND."
        ),
        ".SH COMMANDS",
    ]
    for path, command in commands(group):
        summary = _paragraphs(command.help or "")[:1]
        lines += [
            ".TP",
            f"\\fBkvmlab {_escape(' '.join(path))}\\fR",
            _escape(summary[0] if summary else ""),
        ]
    lines += [
        ".SH SEE ALSO",
        ", ".join(f"\\fBkvmlab-{'-'.join(p)}\\fR(1)" for p, _ in commands(group)),
    ]
    return "\n".join(lines) + "\n"


def write_pages(directory: Path, today: str | None = None) -> list[Path]:
    """Write every page into ``directory`` (created); the paths written."""
    import typer

    from kvmlab.cli.commands import app_for

    stamp = today or date.today().isoformat()
    group = typer.main.get_command(app_for([]))
    directory.mkdir(parents=True, exist_ok=True)
    written = [directory / f"kvmlab.{SECTION}"]
    written[0].write_text(overview(group, stamp))
    for path, command in commands(group):
        target = directory / f"kvmlab-{'-'.join(path)}.{SECTION}"
        target.write_text(page(path, command, stamp))
        written.append(target)
    return written


if __name__ == "__main__":
    for written in write_pages(Path(sys.argv[1])):
        print(written)
