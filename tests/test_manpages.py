"""``man kvmlab-COMMAND`` and shell completion come from the same help text as ``--help``:
a page for every visible command, each rendered by the real ``man`` without a groff
warning, and the completion ``make deps`` installs answering the shell's way."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from kvmlab.cli.manpages import commands, write_pages
from tests.conftest import KVMLAB


def test_a_page_for_every_command(tmp_path: Path) -> None:
    import typer

    from kvmlab.cli.commands import app_for

    written = {p.name for p in write_pages(tmp_path, "2026-11-28")}
    group = typer.main.get_command(app_for([]))
    wanted = {f"kvmlab-{'-'.join(path)}.1" for path, _ in commands(group)}
    assert wanted <= written and "kvmlab.1" in written
    assert {"kvmlab-migrate.1", "kvmlab-tune-apply.1", "kvmlab-results-export.1"} <= written
    page = (tmp_path / "kvmlab-migrate.1").read_text()
    assert "\\-\\-mode" in page and "[[migrations]]" in page and "`" not in page


@pytest.mark.skipif(shutil.which("man") is None, reason="man-db is not installed")
def test_man_renders_each_page_without_warnings(tmp_path: Path) -> None:
    for page in write_pages(tmp_path, "2026-11-28"):
        shown = subprocess.run(
            ["man", "--warnings=all", "-l", str(page)],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "MANWIDTH": "80", "MAN_KEEP_FORMATTING": "0"},
        )
        assert shown.returncode == 0, shown.stderr
        assert shown.stderr == "", (page.name, shown.stderr)
        text = re.sub(".\b", "", shown.stdout)  # man's overstrike bold, undone
        assert "SYNOPSIS" in text and "kvmlab" in text


def complete(*words: str) -> list[str]:
    env = {
        **os.environ,
        "_KVMLAB_COMPLETE": "complete_bash",
        "COMP_WORDS": " ".join(("kvmlab", *words)),
        "COMP_CWORD": str(len(words)),
    }
    done = subprocess.run([KVMLAB], capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_completion_names_commands_options_and_shipped_labs() -> None:
    assert complete("mig") == ["migrate"]
    assert complete("migrate", "--mo") == ["--mode"]
    assert {"nested", "netcompare"} <= set(complete("up", "ne"))
    source = subprocess.run(
        [KVMLAB],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "_KVMLAB_COMPLETE": "source_bash"},
    )
    assert "complete -o default -F _kvmlab_completion kvmlab" in source.stdout
