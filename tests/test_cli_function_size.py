"""The command line parses and prints; it does not orchestrate: no function in
``src/kvmlab/cli`` is over :data:`MAX_LINES` lines (from its ``def`` to its last line,
signature and docstring included). Orchestration belongs in the domain packages, which take
typed arguments and a :class:`kvmlab.progress.Progress` and return data the command prints."""

from __future__ import annotations

import ast

from tests.conftest import ROOT

CLI = ROOT / "src" / "kvmlab" / "cli"
MAX_LINES = 40


def test_no_cli_function_is_over_forty_lines() -> None:
    offenders = []
    for path in sorted(CLI.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                assert node.end_lineno is not None
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_LINES:
                    where = path.relative_to(ROOT)
                    offenders.append(f"{where}:{node.lineno} {node.name} ({lines} lines)")
    assert not offenders, (
        f"functions in src/kvmlab/cli over {MAX_LINES} lines (move the orchestration into "
        "a domain package, or split the function): " + "; ".join(offenders)
    )
