"""``kvmlab migrate --lab``, as the README's strategy table was made: the strategies it
shows that the single-migration tests do not take (``auto``, ``postcopy``, ``multifd``), one
run each with a small working set, each verified, ``auto`` choosing after the fixed ones by
the guest's gap they measured, the HTML page written, nothing left."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.conftest import cli
from tests.runtime.conftest import qemu_pids

pytestmark = pytest.mark.functional

STRATEGIES = ("auto", "postcopy", "multifd")

LAB = 'name = "mstrat"\n[guests.vm]\nvcpus = 1\nmemory = "512M"\nmigratable = true\n' + "".join(
    f'[[migrations]]\nname = "{mode}"\nguest = "vm"\nmode = "{mode}"\n'
    "dirty_rate_mibs = 20\ndirty_mib = 32\nrepetitions = 1\n"
    for mode in STRATEGIES
)


def test_auto_postcopy_and_multifd_side_by_side(tmp_path: Path) -> None:
    (tmp_path / "mstrat.toml").write_text(LAB)
    env = {**os.environ, "KVMLAB_RUN_DIR": str(tmp_path / "run")}
    html = tmp_path / "migrations.html"
    got = cli(
        env,
        "migrate",
        str(tmp_path / "mstrat.toml"),
        "--out",
        str(html),
        "-o",
        "json",
        timeout=1800,
    )
    assert got.returncode == 0, got.stderr[-4000:]
    doc = json.loads(got.stdout)
    rows = {s["name"]: s for s in doc["strategies"]}
    assert sorted(rows) == sorted(STRATEGIES)
    for name, row in rows.items():
        assert row["verified"] and row["runs"] == 1, (name, row["outcomes"])
        (outcome,) = row["outcomes"]
        assert outcome["verdict"] == "VERIFIED" and outcome["status"] == "completed", name
    assert rows["postcopy"]["outcomes"][0]["postcopy_started_s"] is not None, "never switched"
    # auto runs after the fixed strategies and takes the one that paused the guest least
    gaps = {}
    for name in ("postcopy", "multifd"):
        (o,) = rows[name]["outcomes"]
        seen = [v for v in (o["guest_downtime_ms"], o["network"]["downtime_ms"]) if v is not None]
        gaps[name] = max(seen)
    best = min(gaps, key=lambda n: gaps[n])
    (auto,) = rows["auto"]["outcomes"]
    assert auto["choice"].startswith(f"{best} by the guest's gap in this comparison"), (
        gaps,
        auto["choice"],
    )
    assert auto["plan"].startswith(f"auto: {best}"), auto["plan"]
    page = html.read_text()
    assert all(name in page for name in STRATEGIES)
    assert not qemu_pids(str(tmp_path / "run"))
