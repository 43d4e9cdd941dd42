"""The by-configuration table (the nested-paging talk's), from a run's summaries and host
facts."""

from __future__ import annotations

import io

from rich.console import Console

from kvmlab.report.configurations import configurations
from kvmlab.report.markdown import markdown_configurations
from kvmlab.report.table import level_table
from kvmlab.report.text import print_configurations
from kvmlab.results.model import Summary

PLACES = (("host", "L0", "native"), ("l1", "L1", "tcg"), ("l1/l2", "L2", "kvm"))


def build(variant: str, seconds: tuple[float, float, float]) -> list[Summary]:
    out = []
    for (guest, level, accel), value in zip(PLACES, seconds, strict=True):
        for workload, metric, unit, higher, v in (
            ("kbuild", "build_elapsed_s", "s", False, value),
            ("fork", "fork_bogo_ops_per_s", "bogo-ops/s", True, 1000 / value),
        ):
            out.append(
                Summary(
                    variant, guest, level, accel, workload, metric, unit, higher, 3, v, v, v, 0, ""
                )
            )
    return out


HOST = {
    "kvm": "no hardware KVM module (kvm_pvm)",
    "kvm under m/l1/l2": "kvm_amd: npt=1, nested=1 (nested paging (npt))",
    "kvm under m/l1/l2 (l1-shadow)": "kvm_amd: npt=0, nested=1 (shadow paging (npt=0))",
    "not run shadow-on-shadow": "needs hardware KVM on this host with kvm_amd.npt=0",
}


def test_a_row_per_configuration_with_the_deepest_level_against_the_lab_as_written() -> None:
    table = level_table(build("default", (2.5, 60, 80)) + build("l1-shadow", (2.5, 61, 320)))
    configs = configurations(table, HOST)
    assert configs is not None
    assert [h.metric for h in configs.headlines] == ["build_elapsed_s", "fork_bogo_ops_per_s"]
    assert configs.levels == ["L0", "L1", "L2"]
    assert [r.variant for r in configs.rows] == ["default", "l1-shadow", "shadow-on-shadow"]
    kbuild = configs.headlines[0]
    shadow = configs.rows[1]
    assert configs.ratio(shadow, kbuild) == 4.0  # 320 s against 80 s at L2
    assert shadow.kvm == ["m/l1/l2: kvm_amd: npt=0, nested=1 (shadow paging (npt=0))"]
    assert configs.rows[0].kvm == ["m/l1/l2: kvm_amd: npt=1, nested=1 (nested paging (npt))"]
    assert configs.rows[2].not_run is not None and configs.rows[2].values == {}

    out = io.StringIO()
    print_configurations(configs, Console(file=out, width=300, color_system=None))
    text = out.getvalue()
    assert "by configuration: kbuild build_elapsed_s (s, lower is better)" in text
    assert "4.00x" in text and "not run: needs hardware KVM" in text
    md = markdown_configurations(configs)
    assert "| l1-shadow | 2.50 ±0% | 61.0 ±0% | 320 ±0% | 4.00x |" in md


def test_chosen_metrics_only_and_none_for_a_single_configuration() -> None:
    table = level_table(build("default", (2.5, 60, 80)) + build("l1-shadow", (2.5, 61, 320)))
    configs = configurations(table, {}, ["fork.fork_bogo_ops_per_s", "kbuild.build_elapsd_s"])
    assert configs is not None and [h.workload for h in configs.headlines] == ["fork"]
    assert configs.notes == ["[bench] headline 'kbuild.build_elapsd_s': the run has no such row"]
    assert configurations(level_table(build("default", (1, 2, 3))), {}) is None


def test_a_run_cut_short_before_anything_was_measured_has_no_table() -> None:
    assert configurations(level_table([]), {"not run x": "host_kvm needs ..."}) is None


def test_a_headline_whose_workload_has_a_space() -> None:
    where = ("l1", "L1", "tcg", "migrate precopy", "total_time_s", "s", False, 1)
    rows = [
        Summary("default", *where, 2.5, 2.5, 2.5, 0, ""),
        Summary("fast", *where, 2.0, 2.0, 2.0, 0, ""),
    ]
    configs = configurations(level_table(rows), {}, ["migrate precopy.total_time_s"])
    assert configs is not None and configs.headlines[0].workload == "migrate precopy"
    assert configs.ratio(configs.rows[1], configs.headlines[0]) == 0.8


def test_the_html_section_is_a_table_per_metric() -> None:
    from kvmlab.report.html import configurations_section

    table = level_table(build("default", (2.5, 60, 80)) + build("l1-shadow", (2.5, 61, 320)))
    configs = configurations(table, HOST)
    assert configs is not None
    page = str(configurations_section(configs, "Run 1: by configuration", "configurations-1"))
    assert page.count("<table") == 2 and "4.00x" in page and "not run: needs" in page
