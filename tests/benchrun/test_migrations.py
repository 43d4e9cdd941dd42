"""A lab's ``[[migrations]]`` in ``kvmlab run``: run after the suite, stored as workloads of
the run with their time series, shown in the table, the JSON and the HTML report, and a
corrupted guest makes the exit status 5. The guest and the migrations are stand-ins (the
real ones are tests/migrate/test_migrate_functional.py); the CLI, the store, the runner
and the renderers are the real ones."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

import kvmlab.bench.session as session
import kvmlab.migrate.stored as stored
from kvmlab.migrate.compare import Strategy
from kvmlab.migrate.guestside import Check
from kvmlab.migrate.result import Outcome
from kvmlab.migrate.stats import parse
from kvmlab.results.store import ResultStore
from kvmlab.runtime import lab as labrun
from kvmlab.runtime.machine import MachineConfig
from tests.benchrun.test_failure import RecordedHost, StandIn, kvmlab

LAB = """
name = "mv"
[guests.vm]
memory = "512M"
migratable = true
[bench]
workloads = ["cpu"]
repetitions = 2
[[migrations]]
name = "plain"
guest = "vm"
repetitions = 2
dirty_rate_mibs = 60
[[migrations]]
name = "post"
guest = "vm"
mode = "postcopy"
repetitions = 2
"""


def outcome(verified: bool, downtime: float) -> Outcome:
    samples = [
        parse({"status": "active", "ram": {"remaining": 400 << 20, "mbps": 900.0}}, 0.5),
        parse(
            {
                "status": "completed",
                "downtime": downtime,
                "total-time": 2000,
                "ram": {
                    "transferred": 300 << 20,
                    "dirty-sync-count": 5,
                    "remaining": 0,
                    "mbps": 1000.0,
                },
            },
            2.0,
        ),
    ]
    return Outcome(
        "mv/vm",
        "precopy",
        status="completed",
        samples=samples,
        guest_downtime_ms=downtime * 2,
        checks_after=[Check("memory pattern", verified, "3 of 3")],
    )


@pytest.fixture
def lab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The lab file, and what the stand-ins saw."""
    monkeypatch.setenv("KVMLAB_RUN_DIR", str(tmp_path / "run"))
    monkeypatch.setenv("KVMLAB_RESULTS", str(tmp_path / "results.sqlite"))
    monkeypatch.setattr(session, "HostExecutor", RecordedHost)
    seen: dict[str, Any] = {"booted": 0, "migrations": 0, "corrupt": False}

    @contextmanager
    def started(loaded: Any, launch: Any, **kw: Any) -> Iterator[list[StandIn]]:
        seen["booted"] += 1
        config = MachineConfig(
            "mv",
            ("vm",),
            ["qemu"],
            Path("/nowhere"),
            "tcg",
            "test host",
            1,
            512 << 20,
            boots_image=False,
            children=False,
        )
        yield [StandIn(config, None)]

    def run_migrations(
        loaded: Any,
        host: Any,
        image: Any,
        reps: Any,
        progress: Any,
        strategies: list[Strategy],
        path_probe: Any = None,
    ) -> list[Strategy]:
        seen["migrations"] += 1
        seen["path_probe"] = path_probe
        strategies[:] = [Strategy(m, accel="tcg") for m in loaded.lab.migrations]
        strategies[0].outcomes = [outcome(True, 30), outcome(True, 50)]
        strategies[1].outcomes = [outcome(True, 5), outcome(not seen["corrupt"], 7)]
        progress.step("mv/vm post run 2: done")
        return strategies

    monkeypatch.setattr(labrun, "started", started)
    monkeypatch.setattr(stored, "run_migrations", run_migrations)
    path = tmp_path / "mv.toml"
    path.write_text(LAB)
    seen["path"], seen["dir"] = path, tmp_path
    return seen


def test_migrations_are_workloads_of_the_run_with_their_time_series(
    lab: dict[str, Any], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    html = lab["dir"] / "r.html"
    status, out, err = kvmlab(monkeypatch, capsys, "run", str(lab["path"]), "--out", str(html))
    assert status == 2, err  # the suite's cpu cannot run in a migratable guest: refused
    assert "mv/vm (L1) cannot run cpu: it is migratable" in err and "nothing was started" in err
    assert (lab["booted"], lab["migrations"]) == (0, 0)
    status, out, err = kvmlab(
        monkeypatch, capsys, "run", str(lab["path"]), "--only", "migrations", "--out", str(html)
    )
    assert status == 0, err
    assert (lab["booted"], lab["migrations"]) == (0, 1)
    assert "the lab's 2 [[migrations]] after the suite" in err and "mv/vm post run 2" in err
    assert "migrate plain" in out and "QEMU downtime" in out and "verified" in out
    with ResultStore() as store:
        run = store.run("last")
        assert run.complete
        got = {(s.workload, s.metric, s.repetition): s for s in store.samples(run.id)}
        assert got[("migrate plain", "QEMU downtime", 1)].value == 50.0
        assert got[("migrate post", "guest downtime", 0)].value == 10.0
        assert got[("migrate plain", "verified", 0)].unit == "% of 2 runs"
        assert got[("migrate plain", "total time", 0)].command.startswith(
            "kvmlab migrate mv/vm --mode precopy --dirty 60 --dirty-mem 128"
        )
        assert got[("migrate plain", "total time", 0)].level == "L1"
        [(variant, doc)] = store.documents(run.id, "migrations")
    assert variant == "default" and [s["name"] for s in doc["strategies"]] == ["plain", "post"]
    page = html.read_text()
    assert "Run 1: live migrations" in page and "RAM remaining over time (MiB)" in page
    assert "migrate plain: median per metric" not in page  # plotted by the section instead
    status, out, _ = kvmlab(monkeypatch, capsys, "report", "last", "-o", "json")
    report = json.loads(out)
    assert report["migrations"][0]["comparison"]["strategies"][1]["verified"] == 2


def test_a_corrupted_guest_makes_the_run_exit_5_after_the_report(
    lab: dict[str, Any], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    lab["corrupt"] = True
    status, out, err = kvmlab(
        monkeypatch,
        capsys,
        "run",
        str(lab["path"]),
        "--only",
        "migrations",
        "--out",
        str(lab["dir"] / "r.html"),
    )
    assert status == 5, err
    assert "post: 1 of 2" in err and "kvmlab report 1 -o json" in err
    assert lab["booted"] == 0  # --only migrations: no suite, no boot for it
    assert "migrate post" in out and "50" in out  # verified share: 1 of 2 runs
    with ResultStore() as store:
        workloads = {s.workload for s in store.samples(1)}
    assert workloads == {"migrate plain", "migrate post"}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--only", "migrations", "--levels", "L0"], "needs level L1 in --levels"),
        (["--only", "cpu,migrations,bogus"], "unknown workload(s) bogus"),
    ],
)
def test_only_migrations_is_checked_before_anything_runs(
    lab: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    message: str,
) -> None:
    status, _, err = kvmlab(monkeypatch, capsys, "run", str(lab["path"]), *args)
    assert status == 2 and message in err
    assert (lab["booted"], lab["migrations"]) == (0, 0)


def test_only_migrations_needs_a_lab_that_declares_them(
    lab: dict[str, Any], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    plain = lab["dir"] / "plain.toml"
    plain.write_text(LAB.split("[[migrations]]")[0])
    status, _, err = kvmlab(monkeypatch, capsys, "run", str(plain), "--only", "migrations")
    assert status == 2 and "declares no [[migrations]]" in err


def test_levels_without_l1_skip_the_migrations(
    lab: dict[str, Any], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    status, _, err = kvmlab(monkeypatch, capsys, "bench", str(lab["path"]), "--levels", "L0")
    assert status == 0, err
    assert lab["migrations"] == 0


def test_a_skip_found_only_while_running_leaves_the_run_incomplete_exit_3(
    lab: dict[str, Any], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Were the skip not known from the spec (the pre-flight check passed), the workload
    that could not run is stored on its row, everything else is still measured and
    reported, the run is incomplete and the exit status is 3."""
    monkeypatch.setattr(session, "check_measurable", lambda *a: None)
    html = lab["dir"] / "r.html"
    status, out, err = kvmlab(monkeypatch, capsys, "run", str(lab["path"]), "--out", str(html))
    assert status == 3, err
    assert "L1 mv/vm did not measure cpu: it is migratable" in err
    assert "the run is incomplete" in err
    assert "migrate plain" in out and html.exists()  # the migrations still ran and report
    with ResultStore() as store:
        run = store.run("last")
        assert not run.complete
        [failure] = run.failures
        assert failure.skipped and (failure.level, failure.stage) == ("L1", "cpu")
        assert {s.level for s in store.samples(run.id) if s.workload == "cpu"} == {"L0"}
