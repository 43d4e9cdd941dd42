"""Every command's help names what an option takes (``FILE``, ``FORMAT``, ``PORT``), never a
Python or parser type (``<str>``, ``<int range>``, ``TEXT``): kvmlab hooks typer's help for
that (kvmlab.cli.app), and a typer upgrade can undo the hook silently."""

from __future__ import annotations

import re
from typing import Any

import pytest
from typer.main import get_command
from typer.testing import CliRunner

from kvmlab.cli.main import app

ENV = {"COLUMNS": "200", "KVMLAB_TUNING_STATE": "/nonexistent/kvmlab-test/state.json"}
TYPE_NAMES = re.compile(r"<[a-z][a-z ]*>|\b(TEXT|INTEGER|FLOAT|BOOLEAN)\b")


def command_paths(group: Any, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every command's words, subcommands of groups included (``libvirtd start``)."""
    paths = []
    for name, command in sorted(group.commands.items()):
        paths.append((*prefix, name))
        if hasattr(command, "commands"):
            paths.extend(command_paths(command, (*prefix, name)))
    return paths


PATHS = command_paths(get_command(app))


def help_of(words: tuple[str, ...]) -> str:
    result = CliRunner().invoke(app, [*words, "--help"], env=ENV)
    assert result.exit_code == 0, result.output
    return result.stdout


def test_groups_and_their_commands_are_all_walked() -> None:
    assert {("libvirtd", "start"), ("exec",), ("check",)} <= set(PATHS)


@pytest.mark.parametrize("words", PATHS, ids=" ".join)
def test_help_shows_no_type_names(words: tuple[str, ...]) -> None:
    found = TYPE_NAMES.findall(help_of(words))
    assert not found, found


def test_an_option_s_value_is_named_by_kvmlab() -> None:
    text = help_of(("libvirtd", "start"))
    assert re.search(r"--tcp-port PORT\s", text) and "[1024<=x<=65535]" in text, text
    assert re.search(r"--netns\s+NAME\s", text), text
    assert re.search(r"COMMAND\.\.\.\s+Command and arguments", help_of(("exec",)))
