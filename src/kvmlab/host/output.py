"""Doctor output: a rich table for people, JSON for programs, and the exit status.

JSON schema (``kvmlab.doctor/1``; keys appear in this order and are never renamed
within a schema version; new keys may be added)::

    {
      "schema": "kvmlab.doctor/1",
      "exit_status": 0,                  # 0: nothing failed, 1: a check failed
      "counts": {"ok": 0, "warn": 0, "fail": 0, "info": 0, "skip": 0},
      "accel": {"accel": "kvm"|"tcg", "flavour": "kvm_intel"|"kvm_amd"|"kvm_pvm"|"none",
                "reason": "..."},
      "findings": [
        {"id": "kvm.nested", "status": "ok"|"warn"|"fail"|"info"|"skip",
         "summary": "...",
         "evidence": [{"source": "/sys/module/kvm_intel/parameters/nested", "value": "N"}],
         "fix": ["modprobe -r kvm_intel   # stop running VMs first", "..."]}
      ]
    }

``source`` is a host path or the command line that was run; ``fix`` lines are exact
commands or config lines, in order. See docs/doctor-json.md.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from kvmlab import __version__
from kvmlab.host.accel import AccelChoice
from kvmlab.host.findings import Finding, Status
from kvmlab.jsondoc import schema_of

if TYPE_CHECKING:
    from rich.console import Console
    from rich.text import Text

SCHEMA = schema_of("doctor")
STATUS_STYLE = {
    Status.OK: "bold green",
    Status.WARN: "bold yellow",
    Status.FAIL: "bold red",
    Status.INFO: "bold blue",
    Status.SKIP: "dim",
}


def exit_status(findings: Iterable[Finding]) -> int:
    """0 when no check failed, 1 when one did."""
    return 1 if any(f.status is Status.FAIL for f in findings) else 0


def status_counts(findings: Iterable[Finding]) -> dict[str, int]:
    counts = {s.value: 0 for s in Status}
    for f in findings:
        counts[f.status.value] += 1
    return counts


def findings_to_dict(findings: Sequence[Finding], accel: AccelChoice) -> dict[str, Any]:
    """The JSON document as Python data (see the module docstring for the schema)."""
    return {
        "schema": SCHEMA,
        "kvmlab": __version__,
        "exit_status": exit_status(findings),
        "counts": status_counts(findings),
        "accel": {"accel": accel.accel, "flavour": accel.flavour, "reason": accel.reason},
        "findings": [
            {
                "id": f.id,
                "status": f.status.value,
                "summary": f.summary,
                "evidence": [{"source": e.source, "value": e.value} for e in f.evidence],
                "fix": list(f.fix),
            }
            for f in findings
        ],
    }


def findings_to_json(findings: Sequence[Finding], accel: AccelChoice) -> str:
    """The findings and the accelerator choice as indented JSON (schema ``kvmlab.doctor/1``)."""
    return json.dumps(findings_to_dict(findings, accel), indent=2, ensure_ascii=False) + "\n"


INDENT = "      "
"""Evidence and fix lines sit under the check id."""


def print_findings(findings: Sequence[Finding], accel: AccelChoice, console: Console) -> None:
    """Per finding a line (status, check id, summary) and its evidence and fix lines below.

    Nothing is hard-wrapped or cut: a path or a fix command stays on one line to copy
    (a terminal may fold it on screen); no line ends in spaces.
    """
    from rich.text import Text

    width = max((len(f.id) for f in findings), default=0)
    for f in findings:
        label = Text(f"{f.status.value.upper():<4}", style=STATUS_STYLE[f.status])
        summary = Text(f.summary, style="dim" if f.status is Status.SKIP else "")
        _head(console, label, Text(f"{f.id:<{width}}", style="bold"), summary)
        for e in f.evidence:
            _line(console, Text.assemble(INDENT, (f"{e.source}: ", "dim"), (e.value, "dim italic")))
        for fix in f.fix:
            _line(console, Text.assemble(INDENT, ("fix: ", "bold cyan"), (fix, "cyan")))
    counts = status_counts(findings)
    tally = Text()
    for status in Status:
        if tally:
            tally.append(", ")
        tally.append(f"{counts[status.value]} {status.value}", style=STATUS_STYLE[status])
    _line(console, tally)
    choice = Text("accelerator: ", style="bold")
    choice.append(
        accel.accel.upper(), style="bold green" if accel.accel == "kvm" else "bold yellow"
    )
    choice.append(f" ({accel.flavour}): {accel.reason}")
    _line(console, choice)


def _head(console: Console, status: Text, check: Text, summary: Text) -> None:
    """``STATUS  check  summary``; on a wide enough terminal the summary (prose) wraps
    between words under itself, elsewhere the line is never broken."""
    from rich.text import Text

    room = console.width - len(status) - len(check) - 4
    longest = max((len(word) for word in summary.plain.split()), default=0)
    if not console.is_terminal or room < max(30, longest):
        _line(console, Text.assemble(status, "  ", check, "  ", summary))
        return
    from rich.table import Table

    grid = Table.grid(padding=(0, 2, 0, 0))
    grid.add_column(no_wrap=True)
    grid.add_column(no_wrap=True)
    grid.add_column(overflow="fold")
    grid.add_row(status, check, summary)
    console.print(grid)


def _line(console: Console, text: Text) -> None:
    text.rstrip()
    console.print(text, soft_wrap=True, highlight=False)
