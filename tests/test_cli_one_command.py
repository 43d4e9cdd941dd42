"""``kvmlab NAME ...`` builds the one command it runs (kvmlab.cli.commands.app_for): each
command must answer exactly as it does in the whole app, and anything that is not a
command's name (help, --version, a misspelt command) gets the whole app."""

from __future__ import annotations

import pytest
from typer.main import get_command
from typer.testing import CliRunner

from kvmlab.cli.commands import app_for
from kvmlab.cli.main import app

NAMES = sorted(get_command(app).commands)  # type: ignore[attr-defined]
ENV = {"COLUMNS": "200", "KVMLAB_TUNING_STATE": "/nonexistent/kvmlab-test/state.json"}


def answer(args: list[str], whole: bool) -> tuple[int, str, str]:
    result = CliRunner().invoke(app if whole else app_for(args), args, env=ENV)
    return result.exit_code, result.stdout, result.stderr


def test_every_command_is_found() -> None:
    assert {"check", "ps", "up", "exec", "tune", "libvirtd"} <= set(NAMES)
    for name in NAMES:
        one = get_command(app_for([name, "--help"]))
        assert list(one.commands) == [name]  # type: ignore[attr-defined]


@pytest.mark.parametrize("name", NAMES)
def test_a_command_alone_answers_as_in_the_whole_app(name: str) -> None:
    for args in ([name, "--help"], [name, "--no-such-option"]):
        assert answer(args, whole=False) == answer(args, whole=True), args


@pytest.mark.parametrize(
    "args", [[], ["--help"], ["-h"], ["--version"], ["chek", "x.toml"], ["--version", "check"]]
)
def test_anything_else_gets_the_whole_app(args: list[str]) -> None:
    assert app_for(args) is app
