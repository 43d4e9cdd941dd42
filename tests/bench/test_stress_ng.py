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


def test_the_fork_workload_reads_the_yaml_stress_ng_writes_to_its_stdout() -> None:
    from kvmlab.bench.executor import Place
    from kvmlab.bench.registry import LevelWorkload, named
    from kvmlab.bench.suite import SUITES

    place = Place("l1/l2", "L2", "kvm", 2, disk=None, parent_addr=None)
    fork = named("fork")
    assert isinstance(fork, LevelWorkload)
    (step,) = fork.steps(place, SUITES["quick"])
    assert step.argv[:3] == ["stress-ng", "--fork", "2"]  # a stressor per vCPU
    assert step.argv[-2:] == ["--yaml", "/proc/self/fd/1"] and "--timeout" in step.argv
    metrics = step.parse(recorded("stress-ng-fork2-yaml-stdout.yaml"))
    kept = [m for m in metrics if m.name in step.keep]
    assert [m.name for m in kept] == ["fork_bogo_ops_per_s"] and kept[0].value > 0
