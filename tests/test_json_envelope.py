"""Every ``-o json`` document carries the one envelope (``docs/json-output.md``): an object
whose first keys are ``schema`` (``kvmlab.KIND/1``) and ``kvmlab`` (the version). Each
command that can run here without a guest is run for real, its stdout parsed; the
documents of commands that need a running guest are built by the code that prints them."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from kvmlab import __version__
from kvmlab.results.model import Run, Sample
from kvmlab.results.store import ResultStore
from tests.conftest import KVMLAB, LABS, ROOT

DATA = ROOT / "tests" / "exits" / "data"


def check(doc: object, kind: str) -> dict[str, Any]:
    assert isinstance(doc, dict), doc
    assert list(doc)[:2] == ["schema", "kvmlab"], list(doc)[:3]
    assert doc["schema"] == f"kvmlab.{kind}/1" and doc["kvmlab"] == __version__
    return doc


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    db = tmp_path / "r.sqlite"
    with ResultStore(db) as store:
        run = store.start(Run(0, "x", "x.toml", "d" * 64, "quick", "0", time.time() - 5))
        store.add(run, [Sample("default", "host", "L0", "native", "cpu", "m", 1.0, "x", True, 0)])
        store.finish(run)
    return {
        **os.environ,
        "KVMLAB_RESULTS": str(db),
        "KVMLAB_RUN_DIR": str(tmp_path / "run"),
        "KVMLAB_TUNING_STATE": str(tmp_path / "tuning.json"),
    }


COMMANDS = [
    (["doctor"], "doctor", (0, 1)),
    (["labs"], "labs", (0,)),
    (["check", str(LABS / "basic.toml")], "check", (0,)),
    (["check", "--explain", "memory"], "keys", (0,)),
    (["render", "basic"], "render", (0,)),
    (["ps"], "ps", (0,)),
    (["ps", "--all"], "ps", (0,)),
    (["results", "ls"], "runs", (0,)),
    (["report"], "report", (0,)),
    (["results", "export"], "samples", (0,)),
    (["exits", "--import", str(DATA / "perf-kvm-stat-report-timer-storm-l2.txt")], "exits", (0,)),
    (
        ["diagnose", "--import", str(DATA / "perf-kvm-stat-report-timer-storm-l2.txt")],
        "diagnosis",
        (0,),
    ),
    (["tune", "rollback"], "tuning", (0,)),
    (["libvirtd", "list"], "libvirtd", (0,)),
]


@pytest.mark.parametrize(("args", "kind", "codes"), COMMANDS, ids=lambda v: str(v))
def test_each_command_prints_the_envelope(
    args: list[str], kind: str, codes: tuple[int, ...], env: dict[str, str]
) -> None:
    if args[0] in ("exits", "diagnose"):
        args = [*args, "--seconds", "1"]
    done = subprocess.run(
        [KVMLAB, *args, "-o", "json"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode in codes, done.stderr
    check(json.loads(done.stdout), kind)


def test_documents_of_commands_that_need_a_guest() -> None:
    from kvmlab.exits.hostprof import build
    from kvmlab.migrate.compare import to_json
    from kvmlab.migrate.result import Outcome

    check(Outcome("m/vm", "precopy", status="completed").to_json(), "migration")
    check(to_json([]), "migrations")
    rows = (DATA / "hostprof-guest-rows-handwritten.txt").read_text()
    profile = build(rows, "lab/l2", "inside lab/l1", "kvm", 1.0, 200, "perf")
    check(profile.to_json(), "host-profile")


def test_an_inner_kvmlab_s_answer_is_read_by_its_envelope() -> None:
    """The kvmlab inside a guest hypervisor answers ``up``, ``ps`` and ``exits`` in the
    envelope; a document of another kind is refused, not misread."""
    from kvmlab.exits.model import from_json
    from kvmlab.jsondoc import envelope, opened

    with pytest.raises(ValueError, match=r"expected 'kvmlab\.exits/1'"):
        from_json(envelope("ps", {"guests": []}))
    assert opened(envelope("up", {"guests": []}), "up")["guests"] == []
    with pytest.raises(ValueError, match="schema 1"):
        opened({"schema": 1}, "exits")


def test_every_kind_is_documented() -> None:
    doc = (ROOT / "docs" / "json-output.md").read_text()
    kinds = {kind for _, kind, _ in COMMANDS} | {
        "migration",
        "migrations",
        "host-profile",
        "up",
        "exits-compare",
    }
    missing = sorted(k for k in kinds if f"kvmlab.{k}/1" not in doc)
    assert missing == []
