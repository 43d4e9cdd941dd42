"""``kvmlab exits LAB --compare``'s checks before anything boots, and its run of each variant
(kvmlab.exits.compare_variants), with the lab brought up and down by fakes."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from kvmlab.errors import RuntimeFailure, UsageError
from kvmlab.exits.compare_variants import Variants, Window, profile_variants, variants_to_compare
from kvmlab.progress import Relay
from kvmlab.runtime import lab as labrun
from kvmlab.runtime.hostaccel import HostAccel
from kvmlab.spec import load_lab
from tests.conftest import LABS


def test_a_guest_the_lab_lacks_is_refused_with_its_guests() -> None:
    loaded = load_lab(LABS / "basic.toml")
    with pytest.raises(UsageError, match=r"has no guest 'nope'.*its guests: vm1"):
        variants_to_compare(loaded, LABS / "basic.toml", "nope")


def test_a_lab_without_variants_has_nothing_to_compare() -> None:
    loaded = load_lab(LABS / "basic.toml")
    with pytest.raises(UsageError, match=r"nothing to compare \(kvmlab diagnose --apply"):
        variants_to_compare(loaded, LABS / "basic.toml", "vm1")


def fake_lab(monkeypatch: pytest.MonkeyPatch, running: bool) -> list[str]:
    """labrun.up and down recorded; the guest's entry found (``running``) or not."""
    calls: list[str] = []
    record = SimpleNamespace(address=("vm1",))
    entry = SimpleNamespace(address=("vm1",), record=record, run_dir=Path("/run/vm1"))

    def up(variant: Any, launch: labrun.Launch) -> list[Any]:
        launch.progress.step("booted")
        calls.append(f"up {variant}")
        return []

    def down(lab: str, progress: Any = None) -> list[Any]:
        calls.append(f"down {lab}")
        return []

    def of(lab: str) -> Any:
        return SimpleNamespace(entries=lambda: [entry] if running else [])

    monkeypatch.setattr(labrun, "up", up)
    monkeypatch.setattr(labrun, "down", down)
    monkeypatch.setattr("kvmlab.runtime.rundir.LabDir.of", of)
    monkeypatch.setattr("kvmlab.exits.compare_variants.time", SimpleNamespace(sleep=lambda s: None))
    monkeypatch.setattr(
        "kvmlab.exits.collect.profile_guest",
        lambda run_dir, rec, seconds, provider: f"profile {run_dir} {seconds} {provider}",
    )
    return calls


def test_each_variant_is_brought_up_profiled_and_down_inside_the_guard(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls = fake_lab(monkeypatch, running=True)
    said: list[str] = []
    guarded: list[str] = []

    @contextmanager
    def guard(what: str) -> Iterator[None]:
        guarded.append(what)
        yield

    variants = Variants({"as-written": "A", "fixed": "B"}, {})  # type: ignore[dict-item]
    launch = labrun.Launch(HostAccel("tcg", "test"), lambda: None, progress=Relay(said.append))  # type: ignore[arg-type,return-value]
    profiles = profile_variants("lab", variants, "vm1", Window(2.0, 0.0), launch, guard)
    assert dict(profiles) == {  # type: ignore[comparison-overlap]
        "as-written": "profile /run/vm1 2.0 auto",
        "fixed": "profile /run/vm1 2.0 auto",
    }
    assert calls == ["up A", "down lab", "up B", "down lab"]
    assert guarded == ["comparing variant as-written of lab", "comparing variant fixed of lab"]
    assert said[:2] == ["as-written: booted", "as-written: up; settling for 0 s, then 2 s"]


def test_a_guest_not_running_after_up_fails_and_the_lab_goes_down(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls = fake_lab(monkeypatch, running=False)
    variants = Variants({"fixed": "B"}, {})  # type: ignore[dict-item]
    launch = labrun.Launch(HostAccel("tcg", "test"), lambda: None)  # type: ignore[arg-type,return-value]
    with pytest.raises(RuntimeFailure, match="variant fixed: guest vm1 is not running"):
        profile_variants("lab", variants, "vm1", Window(1.0, 0.0), launch)
    assert calls == ["up B", "down lab"]
