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

from kvmlab.host.accel import AccelChoice
from kvmlab.host.findings import Finding, Status

if TYPE_CHECKING:
    from rich.console import Console

SCHEMA = "kvmlab.doctor/1"
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


def print_findings(findings: Sequence[Finding], accel: AccelChoice, console: Console) -> None:
    """A table: coloured status, check id, summary with its evidence and fix lines below."""
    from rich import box
    from rich.console import Group
    from rich.padding import Padding
    from rich.table import Table
    from rich.text import Text

    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    table.add_column("status", no_wrap=True)
    table.add_column("check", no_wrap=True, style="bold")
    table.add_column("finding", overflow="fold")
    for f in findings:
        lines: list[Text | Padding] = [
            Text(f.summary, style="dim" if f.status is Status.SKIP else "")
        ]
        for e in f.evidence:
            line = Text.assemble((f"{e.source}: ", "dim"), (e.value, "dim italic"))
            lines.append(Padding(line, (0, 0, 0, 2)))
        for fix in f.fix:
            line = Text.assemble(("fix: ", "bold cyan"), (fix, "cyan"))
            lines.append(Padding(line, (0, 0, 0, 2)))
        label = Text(f.status.value.upper(), style=STATUS_STYLE[f.status])
        table.add_row(label, f.id, Group(*lines))
    console.print(table)
    counts = status_counts(findings)
    tally = Text()
    for status in Status:
        if tally:
            tally.append(", ")
        tally.append(f"{counts[status.value]} {status.value}", style=STATUS_STYLE[status])
    console.print(tally)
    choice = Text("accelerator: ", style="bold")
    choice.append(
        accel.accel.upper(), style="bold green" if accel.accel == "kvm" else "bold yellow"
    )
    choice.append(f" ({accel.flavour}): {accel.reason}")
    console.print(choice)
