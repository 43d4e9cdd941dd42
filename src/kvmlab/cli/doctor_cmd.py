"""``kvmlab doctor``."""

from __future__ import annotations

from pathlib import Path


def run_doctor(output: str, root: Path) -> int:
    """Run every host check, print them as text or JSON, return the exit status."""
    from kvmlab.host.accel import choose_accel
    from kvmlab.host.doctor import run_checks
    from kvmlab.host.output import exit_status, findings_to_json, print_findings

    findings = run_checks(root)
    accel = choose_accel(root)
    if output == "json":
        print(findings_to_json(findings, accel))
    else:
        from rich.console import Console

        print_findings(findings, accel, Console())
    return exit_status(findings)
