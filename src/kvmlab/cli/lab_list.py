"""``kvmlab labs``: the shipped labs, by name, with what they need."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from kvmlab.cli.jsonout import emit
from kvmlab.labs import lab_path, shipped
from kvmlab.paths import shipped_lab_data
from kvmlab.spec import load_lab
from kvmlab.spec.needs import lab_needs


@dataclass(frozen=True)
class ShippedLab:
    """A shipped lab as ``kvmlab labs`` shows it."""

    name: str
    description: str
    needs: list[str]
    variants: list[str]
    file: str
    data: str
    """Where its relative paths (scratch disks) go."""


def shipped_labs() -> list[ShippedLab]:
    """Every shipped lab, by name."""
    out = []
    for name in shipped():
        loaded = load_lab(lab_path(name))
        variants = loaded.variants()
        out.append(
            ShippedLab(
                name,
                loaded.lab.description,
                lab_needs([v.lab for v in variants.values()]),
                [v for v in variants if v != "default"],
                str(loaded.path),
                str(shipped_lab_data(loaded.path)),
            )
        )
    return out


def print_labs(output: str) -> None:
    """The table (or ``kvmlab.labs/1``)."""
    from rich.console import Console

    from kvmlab.report.grid import Col, print_grid

    labs = shipped_labs()
    if output == "json":
        emit("labs", {"labs": [asdict(lab) for lab in labs]})
        return
    cells = [[lab.name, lab.description, "; ".join(lab.needs)] for lab in labs]
    print_grid(Console(), [Col("LAB"), Col("WHAT IT IS"), Col("NEEDS")], cells)
    print(
        "Give a lab by name to any command (kvmlab check nested, kvmlab up basic); "
        "their disks go to kvmlab's data directory."
    )
