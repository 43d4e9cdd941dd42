"""The variants suggested (commented out) in labs/nested.toml are valid as written."""

from __future__ import annotations

import re
from pathlib import Path

from kvmlab.spec.load import LoadedLab, parse_lab

NESTED = Path(__file__).resolve().parents[2] / "src" / "kvmlab" / "labs" / "nested.toml"


def test_commented_variants_validate_and_differ() -> None:
    text = NESTED.read_text()
    enabled = re.sub(
        r"^# (\[variants|append|kvm|model|vcpus|accel)", r"\1", text, flags=re.MULTILINE
    )
    lab = parse_lab(enabled.encode(), "nested.toml")
    assert set(lab.variants) == {"l1-npt-off", "named-cpu", "one-vcpu", "l2-kvm", "l2-tcg"}
    loaded = LoadedLab(lab=lab, path=NESTED, digest="x")
    variants = loaded.variants()
    npt = variants["l1-npt-off"].lab.guests["l1"].kvm
    assert npt is not None and npt.asked() == {"nested_paging": False}
    assert variants["named-cpu"].lab.guests["l1"].cpu.model == "EPYC"
    assert variants["one-vcpu"].lab.guests["l1"].guests["l2"].vcpus == 1
    assert variants["l2-tcg"].lab.guests["l1"].guests["l2"].accel == "tcg"
    assert variants["l2-kvm"].lab.guests["l1"].guests["l2"].accel == "auto"
    assert variants["l2-tcg"].lab.guests["l1"].under("tcg").vcpus == 1
