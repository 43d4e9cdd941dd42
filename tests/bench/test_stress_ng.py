"""parse_stress_ng against recorded stress-ng 0.15.06 output (YAML and metrics tables)."""

from __future__ import annotations

import pytest

from kvmlab.bench.parsers import ParseError, parse_stress_ng
from tests.bench.recorded import recorded, values


@pytest.mark.parametrize(
    ("name", "real", "cpu"),
    [
        ("stress-ng-cpu2-metrics-brief.txt", 1934.23, 1913.25),
        ("stress-ng-cpu2-metrics.txt", 1937.00, 1977.78),
        ("stress-ng-cpu2-metrics.yaml", 1936.996527, 1977.779308),
    ],
)
def test_cpu(name: str, real: float, cpu: float) -> None:
    metrics = parse_stress_ng(recorded(name))
    assert values(metrics) == {"cpu_bogo_ops_per_s": real, "cpu_bogo_ops_per_cpu_s": cpu}
    assert {(m.unit, m.higher_is_better) for m in metrics} == {("bogo-ops/s", True)}


def test_bad_option() -> None:
    with pytest.raises(ParseError) as info:
        parse_stress_ng(recorded("stress-ng-bad-stressor.txt"))
    assert str(info.value) == "stress-ng: unrecognized option '--nosuchstressor'"


def test_unsuccessful_run() -> None:
    text = recorded("stress-ng-cpu2-metrics-brief.txt").replace(
        "successful run completed", "unsuccessful run completed"
    )
    with pytest.raises(ParseError, match="unsuccessful run completed"):
        parse_stress_ng(text)


def test_no_metrics_requested() -> None:
    text = "\n".join(
        line
        for line in recorded("stress-ng-cpu2-metrics-brief.txt").splitlines()
        if "metrc:" not in line
    )
    with pytest.raises(ParseError, match="no stressor metrics"):
        parse_stress_ng(text)
