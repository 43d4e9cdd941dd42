"""The README's commands, for the tests that run them as written.

Every ``kvmlab`` line of the README's ```sh blocks is run by a test, as it is written there:
a functional test takes its arguments with :func:`readme_line` (which fails when the README
no longer shows that command) and may only add options after them (``-o json``, a shorter
window). ``tests/test_readme_commands.py`` checks that each line is run by some test this way,
or by :mod:`tests.test_readme_quickstarts`, or is named in :data:`NOT_RUN` with the reason.
"""

from __future__ import annotations

import shlex

from tests.conftest import ROOT

README = ROOT / "README.md"

SHELL_OPERATORS = {"|", "||", "&&", ";", ">", ">>", "<", "2>", "&"}
"""Where a command line hands over to the shell (a pipe, a redirection, the next command)."""

NOT_RUN = {
    "kvmlab migrate migrate --variant one-vcpu --out migrations.html": (
        "every strategy of the shipped lab five times (about 8 minutes here); "
        "tests/migrate/test_migrate_lab_functional.py runs a lab's [[migrations]] side by side "
        "on a smaller lab"
    ),
    "kvmlab run paging-matrix": (
        "the whole matrix takes about 26 minutes here; tests/benchrun/test_paging_matrix.py "
        "runs the same lab's l1-shadow configuration with readme_line"
    ),
    "kvmlab run vhost-user-testpmd": (
        "six minutes of PVP trials here; tests/net/test_pvp_functional.py runs the same "
        "workload through a smaller lab"
    ),
    "kvmlab run ovs-dpdk-pvp": (
        "the same PVP loop through OVS-DPDK; tests/net/test_pvp_functional.py runs it on a "
        "smaller lab"
    ),
    "kvmlab tune apply vhost-user-testpmd": (
        "isolates the lab's switch core on this host; tests/net/test_tune_functional.py runs "
        "tune apply, verify and rollback on a CPU of this host"
    ),
    "kvmlab run netcompare": (
        "fifteen minutes of iperf3 and ping here; tests/net/test_netcompare_functional.py "
        "measures every path on a two-guest lab"
    ),
    "kvmlab console basic/vm1": (
        "interactive; tests/runtime/test_lifecycle.py attaches to a guest's console"
    ),
}
"""README commands no test runs as written, and why (the cost here, or a terminal)."""


def sh_blocks(text: str) -> list[list[str]]:
    """The lines of every fenced ```sh block of ``text``."""
    blocks: list[list[str]] = []
    current: list[str] | None = None
    for line in text.splitlines():
        fence = line.strip()
        if current is None and fence == "```sh":
            current = []
        elif current is not None and fence.startswith("```"):
            blocks.append(current)
            current = None
        elif current is not None:
            current.append(line)
    assert current is None, "an ```sh block of the README is never closed"
    return blocks


def readme_commands() -> list[str]:
    """Every line of the README's sh blocks that runs kvmlab, as written (comment included)."""
    return [
        line.strip()
        for block in sh_blocks(README.read_text())
        for line in block
        if line.strip().startswith("kvmlab ")
    ]


def command(line: str) -> str:
    """``line`` without its comment: the command as it is run."""
    return " ".join(shlex.split(line, comments=True))


def argv(line: str) -> list[str]:
    """The arguments kvmlab gets from ``line``: its words after ``kvmlab``, up to a trailing
    ``# comment`` or the first shell operator."""
    words = shlex.split(line, comments=True)
    assert words[0] == "kvmlab", line
    args: list[str] = []
    for word in words[1:]:
        if word in SHELL_OPERATORS:
            break
        args.append(word)
    return args


def readme_line(start: str, lab: str | None = None) -> list[str]:
    """The arguments of the README's command line that begins ``start`` (``"kvmlab up
    timer-storm"``), exactly as the README writes them; fails when the README shows none, or
    more than one. ``lab``: a test's smaller copy of the shipped lab the line names, put in
    place of that name (the only word a test may change; it may add options after)."""
    lines = [line for line in readme_commands() if command(line).startswith(start)]
    exact = [line for line in lines if command(line) == start]  # "kvmlab ps", not "... --all"
    found = [argv(line) for line in (exact or lines)]
    assert len(found) == 1, f"the README shows {len(found)} command(s) starting {start!r}"
    args = found[0]
    if lab is not None:
        from kvmlab.labs import shipped

        named = [i for i, a in enumerate(args) if a in shipped()]
        assert named, f"{start!r} names no shipped lab to put {lab} in place of"
        args = [*args[: named[0]], lab, *args[named[0] + 1 :]]
    return args
