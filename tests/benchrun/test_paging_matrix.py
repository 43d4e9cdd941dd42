"""The nested-paging talk's matrix through ``kvmlab run``, one configuration booted: the shipped
``labs/paging-matrix.toml`` (copied, with one short repetition) measured for its
``l1-shadow`` variant at L2 only. L1's KVM shadows L2's page tables (read back and
recorded), the fork load's exit profile shows shadow paging's own exits, and the table by
configuration shows every row of the matrix: the one measured, the lab as written not asked
for, and the host-side rows this host's KVM cannot run, each with its reason."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.conftest import LABS, cli
from tests.runtime.conftest import qemu_pids

pytestmark = pytest.mark.functional

SHIPPED = "repetitions = 2\nduration = 5\nexit_profile = 10\n"
SHORT = "repetitions = 1\nduration = 2\nexit_profile = 4\n"
SHADOW_KINDS = {"exception_per_s", "cr_access_per_s", "invlpg_per_s"}
"""Exits that shadow paging takes and nested paging does not (#PF, CR3, INVLPG)."""


def test_shadow_paging_in_l1_measured_profiled_and_set_beside_the_matrix(tmp_path: Path) -> None:
    shipped = (LABS / "paging-matrix.toml").read_text()
    assert SHIPPED in shipped
    lab = tmp_path / "paging-matrix.toml"
    lab.write_text(shipped.replace(SHIPPED, SHORT))
    env = {
        **os.environ,
        "KVMLAB_RUN_DIR": str(tmp_path / "run"),
        "KVMLAB_RESULTS": str(tmp_path / "results.sqlite"),
    }
    argv = ["run", str(lab), "--levels", "L2", "--only", "fork", "--variant", "l1-shadow"]
    run = cli(env, *argv, timeout=1800)
    assert run.returncode == 0, run.stderr[-4000:]
    assert (
        not qemu_pids(str(tmp_path / "run")) and not (tmp_path / "run" / "paging-matrix").exists()
    )
    said = [line for line in run.stderr.splitlines() if "paging-matrix/l1's KVM: " in line]
    assert said and ("kvm_amd.npt=0" in said[0] or "kvm_intel.ept=0" in said[0]), run.stderr

    doc = json.loads(cli(env, "report", "last", "-o", "json").stdout)
    host = doc["runs"][0]["host"]
    under = host["kvm under paging-matrix/l1/l2 (l1-shadow)"]
    assert "shadow paging" in under, under  # read back inside L1 by the kvmlab there
    assert host["not run default"] == "not asked for (--variant)"
    assert host["not run shadow-on-shadow"].startswith("host_kvm needs")
    rows = {(r["level"], r["workload"], r["metric"]): r for r in doc["rows"]}
    assert rows[("L2", "fork", "fork_bogo_ops_per_s")]["value"] > 0
    assert rows[("L2", "exits", "all_per_s")]["value"] > 0
    kinds = {m for (level, w, m) in rows if (level, w) == ("L2", "exits")}
    assert kinds & SHADOW_KINDS, kinds  # the profile sees what shadow paging traps

    table = run.stdout
    assert "by configuration: fork fork_bogo_ops_per_s" in table
    assert "by configuration: exits all_per_s" in table
    lines = {line.split()[0]: line for line in table.splitlines() if line.strip()}
    assert "not run: not asked for (--variant)" in lines["default"]
    assert "shadow paging" in lines["l1-shadow"]
    for variant in ("shadow-on-shadow", "no-vmcs-shadowing"):
        assert "not run: host_kvm needs" in lines[variant], lines[variant]
