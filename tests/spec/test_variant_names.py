"""A variant knows its name, and the kvmlab inside a guest hypervisor is told it: it reads
the same lab file, so without the name a variant's changes to L2 were silently lost."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvmlab.errors import UsageError
from kvmlab.runtime.nested import inner_up_argv
from kvmlab.spec import load_lab
from tests.conftest import LABS


def test_variants_carry_their_names() -> None:
    loaded = load_lab(LABS / "nested.toml")
    assert loaded.variant is None
    assert inner_up_argv(loaded, "l1")[-4:] == [str(loaded.path), "--within", "l1", "--json"]


def test_inner_up_names_the_variant(tmp_path: Path) -> None:
    lab = tmp_path / "v.toml"
    lab.write_text(
        (LABS / "timer-storm.toml").read_text()
        + "\n[variants.base]\n[variants.fixed.guests.l1.guests.idle.clock.timers]\n"
        "kvmclock = { present = true }\n"
    )
    loaded = load_lab(lab)
    fixed = loaded.variant_named("fixed")
    assert fixed.variant == "fixed"
    idle = fixed.lab.find("l1/idle")
    assert idle is not None and idle.clock.timers.kvmclock.present is True
    assert inner_up_argv(fixed, "l1")[-2:] == ["--variant", "fixed"]
    with pytest.raises(UsageError, match="no variant 'nope' \\(it has: default, base, fixed;"):
        loaded.variant_named("nope")
    with pytest.raises(UsageError, match="it has: default;"):
        load_lab(LABS / "timer-storm.toml").variant_named("x")
    assert loaded.variant_named("default") is loaded  # the lab as written
    assert inner_up_argv(loaded, "l1")[-2:] != ["--variant", "default"]
