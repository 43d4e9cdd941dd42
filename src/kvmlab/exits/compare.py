"""Before and after a fix, side by side: the two tables of the idle-guest exit-storm write-up
(exits by reason, host CPU against guest CPU) for each variant of a lab, and whether what
the fix should drop dropped."""

from __future__ import annotations

import json
from collections.abc import Mapping

from rich.console import Console

from kvmlab.exits.fixes import guest_context
from kvmlab.exits.model import Profile
from kvmlab.exits.rules import evaluate, verify_fix
from kvmlab.jsondoc import envelope
from kvmlab.report.grid import Col, print_grid
from kvmlab.spec import Guest


def _change(before: float, after: float) -> str:
    if not before:
        return "new" if after else "-"
    return f"{100 * (after - before) / before:+.0f}%"


def compare_json(profiles: Mapping[str, Profile], guests: Mapping[str, Guest]) -> dict[str, object]:
    """Each variant's profile and findings, and the verify checks of the first's findings."""
    names = list(profiles)
    first = names[0]
    diagnoses = {n: evaluate(p, guest_context(guests[n])) for n, p in profiles.items()}
    checks = []
    for finding in diagnoses[first].findings:
        for other in names[1:]:
            for check in verify_fix(
                finding.rule, profiles[first], profiles[other], guest_context(guests[first])
            ):
                checks.append(
                    {
                        "rule": finding.id,
                        "variant": other,
                        "what": check.what,
                        "before": check.before,
                        "after": check.after,
                        "unit": check.unit,
                        "dropped": check.dropped,
                    }
                )
    variants = {
        n: {"profile": p.to_json(), "findings": [f.to_json() for f in diagnoses[n].findings]}
        for n, p in profiles.items()
    }
    return envelope("exits-compare", {"variants": variants, "verify": checks})


def show_compare(
    profiles: Mapping[str, Profile], guests: Mapping[str, Guest], console: Console, output: str
) -> None:
    """Print the comparison (``output``: text or json)."""
    data = compare_json(profiles, guests)
    if output == "json":
        print(json.dumps(data, indent=2))
        return
    names = list(profiles)
    first = names[0]

    def say(text: str = "") -> None:
        console.print(text, soft_wrap=True, highlight=False, markup=False)

    for name, profile in profiles.items():
        say(
            f"{name}: {profile.provider}, {profile.seconds:.1f} s window"
            + (f", PARTIAL: {profile.partial}" if profile.partial else "")
        )
    reasons = sorted(
        {r.reason for p in profiles.values() for r in p.reasons},
        key=lambda r: -max(_rate(p, r) for p in profiles.values()),
    )
    rows = [
        [
            r,
            *(f"{_rate(profiles[n], r):.0f}" for n in names),
            *(_change(_rate(profiles[first], r), _rate(profiles[n], r)) for n in names[1:]),
        ]
        for r in reasons
    ]
    rows.append(
        [
            "all exits",
            *(f"{profiles[n].rate(profiles[n].total):.0f}" for n in names),
            *(
                _change(
                    profiles[first].rate(profiles[first].total), profiles[n].rate(profiles[n].total)
                )
                for n in names[1:]
            ),
        ]
    )
    cols = [
        Col("exit reason"),
        *(Col(f"{n}\nper s", "right") for n in names),
        *(Col(f"{n}\nvs {first}", "right") for n in names[1:]),
    ]
    console.print()
    print_grid(console, cols, rows, title="VM exits by reason, per second")
    cpu_rows = []
    for label, attr in (
        ("host CPU% (QEMU)", "host_percent"),
        ("guest CPU% (its /proc/stat)", "guest_percent"),
        ("gap (host - guest)", "gap_percent"),
    ):
        cells = [label]
        for n in names:
            cpu = profiles[n].cpu
            value = None if cpu is None else getattr(cpu, attr)
            cells.append("-" if value is None else f"{value:.1f}")
        cpu_rows.append(cells)
    console.print()
    print_grid(
        console,
        [Col("CPU (100 = one CPU)"), *(Col(n, "right") for n in names)],
        cpu_rows,
        title="host CPU against guest CPU, same window length",
    )
    verify = data["verify"]
    assert isinstance(verify, list)
    for check in verify:
        verdict = {True: "dropped", False: "DID NOT DROP", None: "not measured"}[check["dropped"]]
        before = "-" if check["before"] is None else f"{check['before']:.0f}"
        after = "-" if check["after"] is None else f"{check['after']:.0f}"
        say(
            f"verify {check['rule']}: {check['what']}: {before} -> {after} {check['unit']} "
            f"in {check['variant']}: {verdict}"
        )


def _rate(profile: Profile, reason: str) -> float:
    return sum(profile.rate(r.count) for r in profile.reasons if r.reason == reason)
