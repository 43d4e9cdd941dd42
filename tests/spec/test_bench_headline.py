"""``[bench] headline``: workload.metric names, the workload one kvmlab has."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from kvmlab.spec.bench import BenchSpec


@pytest.mark.parametrize(
    "name",
    [
        "kbuild.build_elapsed_s",
        "exits.all_per_s",
        "pvp.64B received",
        "migrate precopy.total_time_s",
    ],
)
def test_real_metric_names_are_taken(name: str) -> None:
    assert BenchSpec(headline=[name]).headline == [name]


@pytest.mark.parametrize("name", ["kbuild", "kbild.build_elapsed_s", "cpu.", "cpu.a;rm"])
def test_what_no_workload_has_is_refused(name: str) -> None:
    with pytest.raises(ValidationError, match=r"each is workload\.metric"):
        BenchSpec(headline=[name])
