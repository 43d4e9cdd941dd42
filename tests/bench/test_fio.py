"""parse_fio against recorded fio 3.33 JSON (values copied from the files)."""

from __future__ import annotations

import pytest

from kvmlab.bench.parsers import ParseError, parse_fio
from tests.bench.recorded import recorded, values

MIB = 1024 * 1024


def _expected(
    key: str, iops: float, bw_bytes: int, clat_ns: tuple[int, int, int]
) -> dict[str, float]:
    p50, p99, p99_9 = clat_ns
    return {
        f"{key}_iops": iops,
        f"{key}_bandwidth_mib_s": bw_bytes / MIB,
        f"{key}_clat_p50_us": p50 / 1000,
        f"{key}_clat_p99_us": p99 / 1000,
        f"{key}_clat_p99_9_us": p99_9 / 1000,
    }


# file -> direction key, iops, bw_bytes, clat p50/p99/p99.9 (ns), lat_ns mean
SINGLE = {
    "fio-randread-4k.json": (
        "randread",
        76662.837163,
        314010981,
        (1515520, 6062080, 10551296),
        1668143.689397,
    ),
    "fio-randwrite-4k.json": (
        "randwrite",
        138665.667166,
        567974572,
        (823296, 1679360, 5079040),
        922270.491055,
    ),
    "fio-randread-4k-numjobs2.json": (
        "randread",
        77688.622754,
        318212598,
        (3129344, 8585216, 12386304),
        3290838.084297,
    ),
    "fio-randwrite-4k-numjobs2.json": (
        "randwrite",
        115323.015477,
        472363071,
        (2056192, 4751360, 7438336),
        2217819.872398,
    ),
}


@pytest.mark.parametrize("name", sorted(SINGLE))
def test_one_job_or_group_reporting(name: str) -> None:
    key, iops, bw_bytes, clat_ns, lat_ns = SINGLE[name]
    got = values(parse_fio(recorded(name)))
    lat = got.pop(f"{key}_lat_mean_us")
    assert got == _expected(key, iops, bw_bytes, clat_ns)
    assert lat == pytest.approx(lat_ns / 1000, rel=1e-12)


def test_randrw_gives_both_directions_in_order() -> None:
    got = values(parse_fio(recorded("fio-randrw-4k-numjobs2.json")))
    read_lat, write_lat = got.pop("randread_lat_mean_us"), got.pop("randwrite_lat_mean_us")
    assert got == {
        **_expected("randread", 38289.0664, 156832015, (2408448, 4554752, 5603328)),
        **_expected("randwrite", 38406.889666, 157314620, (3817472, 9109504, 15138816)),
    }
    assert next(iter(got)) == "randread_iops"
    assert read_lat == pytest.approx(2616.081641806, rel=1e-12)
    assert write_lat == pytest.approx(4053.377897971, rel=1e-12)


def test_jobs_without_group_reporting_are_combined() -> None:
    """Two jobs: IOPS and bandwidth add up, percentiles are the worse job's, mean is weighted."""
    got = values(parse_fio(recorded("fio-randwrite-4k-numjobs2-nogroup.json")))
    assert got["randwrite_iops"] == 71238.261738 + 71692.653673
    assert got["randwrite_bandwidth_mib_s"] == (291791920 + 293653109) / MIB
    assert got["randwrite_clat_p50_us"] == 1695.744
    assert got["randwrite_clat_p99_us"] == 3784.704  # job 0 (job 1: 3686.4)
    assert got["randwrite_clat_p99_9_us"] == 5865.472  # job 1 (job 0: 5799.936)
    weighted = (1795924.876756 * 142619 + 1784653.986588 * 143457) / (142619 + 143457)
    assert got["randwrite_lat_mean_us"] == pytest.approx(weighted / 1000, rel=1e-12)


def test_units_and_direction() -> None:
    for m in parse_fio(recorded("fio-randrw-4k-numjobs2.json")):
        if m.name.endswith("_iops"):
            assert (m.unit, m.higher_is_better) == ("IOPS", True)
        elif m.name.endswith("_bandwidth_mib_s"):
            assert (m.unit, m.higher_is_better) == ("MiB/s", True)
        else:
            assert m.name.endswith("_us")
            assert (m.unit, m.higher_is_better) == ("us", False)


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("fio-bad-option.txt", "unrecognized option '--bogus-option=1'"),
        ("fio-missing-directory.txt", "/tmp/kvmlab-rec/missing is not a directory"),
        ("fio-filename-is-dir.json", "job 'x' failed with error 21 (Is a directory)"),
        ("fio-filename-is-dir-merged.txt", "job 'x' failed with error 21 (Is a directory)"),
    ],
)
def test_fio_errors(name: str, message: str) -> None:
    with pytest.raises(ParseError) as info:
        parse_fio(recorded(name))
    assert str(info.value) == f"fio: {message}"
    assert info.value.tool == "fio"
    assert info.value.exit_code == 3


def test_lines_before_the_json_are_skipped() -> None:
    text = "fio: some warning\n" + recorded("fio-randread-4k.json")
    assert parse_fio(text) == parse_fio(recorded("fio-randread-4k.json"))


def test_no_io_is_an_error() -> None:
    text = '{"jobs": [{"jobname": "j", "error": 0, "read": {"io_bytes": 0}}]}'
    with pytest.raises(ParseError, match="no job completed any I/O"):
        parse_fio(text)


def test_sequential_rw_and_missing_percentiles() -> None:
    """``rw=read`` names metrics ``read_*``; without clat percentiles they are left out."""
    text = (
        '{"global options": {"rw": "read"}, "jobs": [{"jobname": "j", "error": 0,'
        ' "read": {"io_bytes": 4096, "iops": 10, "bw": 40,'
        ' "clat_ns": {"mean": 1}, "lat_ns": {"mean": 2000, "N": 1}}}]}'
    )
    assert values(parse_fio(text)) == {
        "read_iops": 10.0,
        "read_bandwidth_mib_s": 40 * 1024 / MIB,
        "read_lat_mean_us": 2.0,
    }


def test_read_then_write_in_one_run_gives_both_directions() -> None:
    # kvmlab's disk workload: two jobs, the second --stonewall, each its own group.
    got = {m.name: m for m in parse_fio(recorded("fio-randread-then-randwrite-stonewall.json"))}
    for rw in ("randread", "randwrite"):
        assert got[f"{rw}_iops"].value > 0 and got[f"{rw}_iops"].unit == "IOPS"
        assert got[f"{rw}_clat_p99_us"].value > 0
    assert got["randread_iops"].value != got["randwrite_iops"].value, "not one merged group"
