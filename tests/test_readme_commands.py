"""The README as a newcomer reads it: short, every ``kvmlab`` command in its ``sh`` blocks
accepted by the real command line, no word of the source write-ups' numbering, and every page
it links present. Nothing runs: each command is parsed as ``kvmlab`` would parse it, without
invoking it."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
import typer
from typer.core import TyperGroup

from kvmlab.cli.commands import app_for
from tests.conftest import ROOT
from tests.readme import NOT_RUN, README, argv, command, readme_commands

DOCS = ROOT / "docs"
MAX_LINES = 250

IN_FLIGHT = "CLI spelling in flight"
NOT_YET: dict[str, str] = {}
"""README commands the CLI does not accept yet, while its spelling is being made consistent:
the start of the command line (``"kvmlab tune apply"``) and why. Such a case is ``xfail``, not
strict, so it passes as soon as the CLI does; empty when the CLI accepts every command."""


def parse(args: list[str]) -> str:
    """Parse ``args`` with the command ``kvmlab`` builds for them, down to the subcommand that
    would run (``tune apply``), and return its path. A bad command line raises click's
    ``UsageError`` (or one of its subclasses), as it would for a user."""
    command = typer.main.get_command(app_for(args))
    ctx = command.make_context("kvmlab", list(args))
    while isinstance(ctx.command, TyperGroup):
        rest = [*ctx._protected_args, *ctx.args]
        if not rest:
            break
        name, sub, rest = ctx.command.resolve_command(ctx, rest)
        assert sub is not None and name is not None
        ctx = sub.make_context(name, rest, parent=ctx)
    return ctx.command_path


def is_usage_error(exc: BaseException) -> bool:
    """Whether ``exc`` is click's UsageError (typer vendors click; the class is matched by name,
    as kvmlab's entry point does)."""
    return any(k.__name__ == "UsageError" for k in type(exc).__mro__)


def command_cases() -> list[object]:
    """One case per README command, those the CLI does not accept yet marked ``xfail``."""
    cases: list[object] = []
    for line in readme_commands():
        key = " ".join(argv(line)[:3])
        marks = [
            pytest.mark.xfail(reason=f"{IN_FLIGHT}: {why}", strict=False)
            for prefix, why in NOT_YET.items()
            if f"kvmlab {key}".startswith(prefix)
        ]
        cases.append(pytest.param(line, id=line.split("#")[0].strip(), marks=marks))
    return cases


def test_readme_is_short() -> None:
    lines = README.read_text().splitlines()
    assert len(lines) <= MAX_LINES, f"README.md has {len(lines)} lines; at most {MAX_LINES}"


def test_readme_shows_commands() -> None:
    """The quick starts are there to be copied: the README shows kvmlab commands."""
    assert len(readme_commands()) >= 10


@pytest.mark.parametrize("line", command_cases())
def test_readme_command_parses(line: str) -> None:
    args = argv(line)
    try:
        path = parse(args)
    except Exception as exc:
        if not is_usage_error(exc):
            raise
        message = getattr(exc, "message", str(exc))
        pytest.fail(f"{line!r} is not a valid kvmlab command line: {message}")
    assert path.startswith("kvmlab "), path


@pytest.mark.parametrize(
    "line",
    [
        "kvmlab bogus",
        "kvmlab up basic --no-such-option",
        "kvmlab tune frobnicate",
        "kvmlab run nested --suite",
    ],
)
def test_parse_refuses_a_bad_command_line(line: str) -> None:
    """The check can fail: what kvmlab would refuse, it refuses here too."""
    with pytest.raises(Exception) as caught:
        parse(argv(line))
    assert is_usage_error(caught.value), repr(caught.value)


def test_argv_stops_at_comments_and_the_shell() -> None:
    assert argv("kvmlab ps   # running guests") == ["ps"]
    assert argv("kvmlab doctor | head -1") == ["doctor"]
    assert argv("kvmlab render basic -o libvirt > vm1.xml") == ["render", "basic", "-o", "libvirt"]
    assert argv('kvmlab exec basic/vm1 -- sh -c "echo hi"') == [
        "exec",
        "basic/vm1",
        "--",
        "sh",
        "-c",
        "echo hi",
    ]


NUMBERED = re.compile(r"seeds? ?\d{3}", re.IGNORECASE)
"""How the source write-ups are numbered among the project's notes: users never saw that."""


def pages() -> list[Path]:
    return [README, *sorted(DOCS.glob("*.md"))]


@pytest.mark.parametrize("page", pages(), ids=lambda p: p.name)
def test_no_write_up_numbers_or_paths_outside_the_repository(page: Path) -> None:
    bad = [
        f"{page.name}:{number}: {line.strip()}"
        for number, line in enumerate(page.read_text().splitlines(), 1)
        if NUMBERED.search(line) or "../shared" in line
    ]
    assert not bad, "\n".join(bad)


LINK = re.compile(r"\]\(([^)\s]+)\)")


def slug(heading: str) -> str:
    """A Markdown heading's anchor, as GitHub makes it."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """The anchors of ``page``'s headings (outside code blocks)."""
    found: set[str] = set()
    fence = False
    for line in page.read_text().splitlines():
        if line.startswith("```"):
            fence = not fence
        elif not fence and line.startswith("#"):
            found.add(slug(line.lstrip("#")))
    return found


def local_links(page: Path) -> list[tuple[Path, str]]:
    """The links of ``page`` to Markdown files of this repository: (file, anchor or '')."""
    out = []
    for target in LINK.findall(page.read_text()):
        if "://" in target or target.startswith("#"):
            continue
        path, _, anchor = target.partition("#")
        if path.endswith(".md"):
            out.append(((page.parent / path).resolve(), anchor))
    return out


def test_readme_docs_links_exist() -> None:
    links = [(path, anchor) for path, anchor in local_links(README) if path.parent == DOCS]
    assert links, "the README links its docs pages"
    missing = [str(path.relative_to(ROOT)) for path, _ in links if not path.is_file()]
    assert not missing, f"README.md links pages that do not exist: {missing}"


@pytest.mark.parametrize("page", pages(), ids=lambda p: p.name)
def test_links_between_pages_resolve(page: Path) -> None:
    """Every link to a Markdown page of the repository, and its anchor, exists."""
    broken = []
    for path, anchor in local_links(page):
        if not path.is_file():
            broken.append(f"{path.relative_to(ROOT)} (no such file)")
        elif anchor and anchor not in anchors(path):
            broken.append(f"{path.relative_to(ROOT)}#{anchor} (no such heading)")
    assert not broken, f"{page.name}: " + ", ".join(broken)


def claimed_by_tests() -> dict[str, str]:
    """``readme_line("...")`` calls in the tests: the start of a README command -> the test
    file that runs it."""
    found: dict[str, str] = {}
    for path in sorted((ROOT / "tests").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "readme_line"
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)
            ):
                found[node.args[0].value] = path.relative_to(ROOT).as_posix()
    return found


def test_every_readme_command_is_run_as_written_by_a_test() -> None:
    """A README command is run by a test (which takes it with readme_line, or the quick
    start test runs it), or named in NOT_RUN with why: the README cannot drift from the
    CLI unseen."""
    from tests.test_readme_quickstarts import RUN_HERE

    claimed = claimed_by_tests()
    missing = [
        line
        for line in readme_commands()
        if command(line) not in NOT_RUN
        and command(line) not in RUN_HERE
        and not any(command(line).startswith(start) for start in claimed)
    ]
    assert not missing, "README commands no test runs:\n" + "\n".join(missing)
    shown = {command(line) for line in readme_commands()}
    stale = sorted(set(NOT_RUN) - shown) + sorted(set(RUN_HERE) - shown)
    assert not stale, f"not in the README any more: {stale}"
