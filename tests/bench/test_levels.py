"""Levels a lab cannot provide, or a lab that is up, are refused before anything is measured."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvmlab.bench.session import lab_levels, parse_levels, run_bench
from kvmlab.bench.suite import settings_for
from kvmlab.errors import StateError, UsageError
from kvmlab.guest.image import GuestImage
from kvmlab.results.store import ResultStore
from kvmlab.runtime.lab import HostAccel, Launch
from kvmlab.spec import LoadedLab, load_lab
from tests.conftest import LABS
from tests.fakeguest import running_guest

VARIANT_ADDS_L2 = """
name = "half"
[guests.l1]
nested = true
memory = "4G"
[variants.plain.guests.l1]
vcpus = 2
[variants.deep.guests.l1.guests.l2]
memory = "1G"
"""


def no_image() -> GuestImage:
    raise AssertionError("nothing may boot")


def bench(loaded: LoadedLab, levels: set[str], db: Path) -> ResultStore:
    store = ResultStore(db)
    settings = settings_for("quick", loaded.lab.bench, ["cpu"])
    run_bench(
        loaded,
        settings,
        levels,
        store,
        Launch(HostAccel("tcg", "test", None), no_image),
        {},
    )
    return store


def test_levels_each_shipped_lab_provides() -> None:
    assert lab_levels(load_lab(LABS / "basic.toml")) == {"L0", "L1"}
    assert lab_levels(load_lab(LABS / "nested.toml")) == {"L0", "L1", "L2"}


def test_l2_on_a_lab_without_one_names_the_lab_and_what_it_has() -> None:
    loaded = load_lab(LABS / "basic.toml")
    with pytest.raises(UsageError) as info:
        parse_levels("L0,l2", loaded)
    message = str(info.value)
    assert message.startswith(f"lab basic ({loaded.path}) cannot be measured at L2: ")
    assert "the lab has L1 vm1; it can be measured at --levels L0,L1" in message


def test_every_variant_must_provide_the_level(tmp_path: Path) -> None:
    lab = tmp_path / "half.toml"
    lab.write_text(VARIANT_ADDS_L2)
    loaded = load_lab(lab)
    assert lab_levels(loaded) == {"L0", "L1"}
    with pytest.raises(UsageError, match="holding guests of its own in every variant"):
        parse_levels("L2", loaded)


def test_bad_level_names() -> None:
    loaded = load_lab(LABS / "nested.toml")
    assert parse_levels(" l0 ,L2,", loaded) == {"L0", "L2"}
    for bad in ("", "L3", "L0;L1"):
        with pytest.raises(UsageError, match="--levels takes a list of L0, L1, L2"):
            parse_levels(bad, loaded)


def test_run_bench_stores_nothing_for_a_missing_level(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="cannot be measured at L2"):
        bench(load_lab(LABS / "basic.toml"), {"L0", "L2"}, tmp_path / "r.sqlite")
    with ResultStore(tmp_path / "r.sqlite") as store:
        assert store.runs() == []


def test_run_bench_refuses_a_lab_that_is_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KVMLAB_RUN_DIR", str(tmp_path / "run"))
    with running_guest("basic"), pytest.raises(StateError, match="lab basic is already up"):
        bench(load_lab(LABS / "basic.toml"), {"L0"}, tmp_path / "r.sqlite")
    with ResultStore(tmp_path / "r.sqlite") as store:
        assert store.runs() == [], "nothing measured, no run stored"
