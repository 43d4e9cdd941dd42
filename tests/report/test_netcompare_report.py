"""netcompare's tables: one row per path with every test, one per path and channel count."""

from __future__ import annotations

from kvmlab.report.netcompare import cell, grids, notes
from kvmlab.results.model import Sample
from kvmlab.results.stats import summarize


def s(metric: str, value: float, rep: int = 0, unit: str = "Gbit/s") -> Sample:
    return Sample("default", "a", "L1", "tcg", "netcompare", metric, value, unit, True, rep)


SAMPLES = [
    s("tap a-b: tcp P1 ->", 1.0),
    s("tap a-b: tcp P1 ->", 3.0, 1),
    s("tap a-b: tcp P1 ->", 2.0, 2),
    s("tap a-b: ping p99", 0.4, unit="ms"),
    s("user (slirp) a-host: tcp P1 ->", 0.5),
    s("tap a-b: udp 64B -> loss", 3.0, unit="%"),
    s("tap a-b: queue pairs in use", 2, unit="count"),
    s("tap a-b: 1q tcp P30 ->", 0.7),
    s("tap a-b: 2q tcp P30 ->", 0.9),
    s("tap a-b: 2q tcp P30 -> busiest rx queue", 55.0, unit="%"),
    s("tap a-b: 2q tcp P30 -> rx queues used", 2, unit="count"),
]


def test_paths_table_has_a_row_per_path_and_a_column_per_test() -> None:
    doc = {
        "multiqueue": {
            "tap a-b": {
                "spreads": {"2q tcp P30 ->": ["rx 2 queues: 45/55 %", "rx irq 2 queues: 40/60 %"]}
            }
        }
    }
    paths, queues = grids(summarize(SAMPLES), [("default", doc)])
    assert [c.header for c in paths.columns] == [
        "path",
        "tcp P1 ->\nGbit/s",
        "ping p99\nms",
        "udp 64B -> loss\n%",
    ]
    assert paths.rows == [
        ["tap a-b", "2 ±50%", "0.4", "3"],
        ["user (slirp) a-host", "0.5", "-", "-"],
    ]
    assert [r[:2] for r in queues.rows] == [["tap a-b", "1"], ["tap a-b", "2"]]
    assert queues.rows[1][2:] == ["0.9", "45/55 %"] and queues.rows[0][2:] == ["0.7", "-"]
    assert queues.columns[-1].header == "tcp P30 ->\nRX queues %"


def test_no_netcompare_no_tables_and_variants_get_their_own() -> None:
    assert (
        grids(summarize([Sample("default", "a", "L1", "tcg", "cpu", "x", 1, "s", False, 0)])) == []
    )
    two = [
        *SAMPLES[:1],
        Sample("mq", "a", "L1", "tcg", "netcompare", "tap a-b: tcp P1 ->", 1.0, "Gbit/s", True, 0),
    ]
    assert [g.title.split(":")[0] for g in grids(summarize(two))] == [
        "netcompare (default)",
        "netcompare (mq)",
    ]
    assert cell(None) == "-"


def test_notes_name_left_out_nics_and_findings() -> None:
    doc = {
        "left_out": ["guests.vm1.nics[3]: no /dev/vhost-net on this host"],
        "multiqueue": {
            "vhost-user (ovs-dpdk) vm1-vm2": {
                "guest": "nc/vm1",
                "device": "eth2",
                "asked": 2,
                "in_use": 2,
                "findings": [
                    {"what": "eth2: single interrupt", "reason": "MSI-X off", "fix": "vectors=6"}
                ],
            }
        },
    }
    got = notes([("default", doc)])
    assert got[0] == "left out guests.vm1.nics[3]: no /dev/vhost-net on this host"
    assert got[2] == (
        "vhost-user (ovs-dpdk) vm1-vm2: FINDING eth2: single interrupt: MSI-X off; fix: vectors=6"
    )
