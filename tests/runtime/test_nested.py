"""A nested lab for real: L1 runs kvmlab, which starts L2 inside L1.

L1 has two vCPUs under KVM and one under TCG (``when_tcg``), so L2 gets KVM from
``accel = "auto"`` either way: on a TCG host, KVM in L1 survives L2's load only with one
vCPU (kvmlab.host.accel.OUTER_TCG_REASON).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvmlab.host.accel import choose_accel
from tests.runtime.conftest import kvmlab, qemu_pids

pytestmark = pytest.mark.functional

LAB = """
name = "nest"
[guests.l1]
nested = true
vcpus = 2
memory = "2G"
nics = [{ type = "user" }]
when_tcg = { vcpus = 1 }
kvm = { nested_paging = false }

[guests.l1.guests.l2]
vcpus = 1
memory = "512M"
"""


def test_l1_l2_up_exec_ps_down(run_root: Path, tmp_path: Path) -> None:
    lab = tmp_path / "nest.toml"
    lab.write_text(LAB)
    up = kvmlab("up", str(lab), timeout=600)
    assert up.returncode == 0, up.stderr[-3000:]
    assert "nest/l1/l2 is up inside nest/l1" in up.stderr
    # L1's KVM as the lab asks (shadow paging for L2, seed 003's slow row), read back
    assert "nest/l1's KVM: kvm_amd.npt=0 (read back from its /sys/module)" in up.stderr

    l1 = kvmlab(
        "exec",
        "nest/l1",
        "--",
        "sh",
        "-c",
        "test -c /dev/kvm && cd /sys/module/kvm_amd/parameters && cat nested npt",
    )
    assert l1.returncode == 0, l1.stderr
    nested, npt = l1.stdout.split()
    assert nested in ("1", "Y"), "L1 is a guest hypervisor with nested KVM"
    assert npt == "N", "checked by the test itself, not by kvmlab's read-back"

    l2 = kvmlab("exec", "nest/l1/l2", "--", "hostname")
    assert (l2.returncode, l2.stdout.strip()) == (0, "l2")
    code = kvmlab("exec", "nest/l1/l2", "--", "sh", "-c", "exit 5")
    assert code.returncode == 5

    expected = "kvm"
    assert f"nest/l1/l2 is up inside nest/l1 ({expected}," in up.stderr
    l1_vcpus = kvmlab("exec", "nest/l1", "--", "nproc").stdout.strip()
    assert l1_vcpus == ("2" if choose_accel().accel == "kvm" else "1")

    rows = {r["address"]: r for r in json.loads(kvmlab("ps", "-o", "json").stdout)}
    assert set(rows) == {"nest/l1", "nest/l1/l2"}
    assert rows["nest/l1"]["level"] == "L1" and rows["nest/l1/l2"]["level"] == "L2"
    assert rows["nest/l1/l2"]["accel"] == expected
    assert rows["nest/l1/l2"]["via"] == "l1"
    assert rows["nest/l1/l2"]["boot_s"]["total"] > 0

    down = kvmlab("down", "nest", timeout=300)
    assert down.returncode == 0, down.stderr
    assert "stopping the guests inside nest/l1" in down.stderr
    assert down.stderr.index("inside nest/l1") < down.stderr.index("stopping nest/l1\n")
    assert not qemu_pids(str(run_root))
    assert not (run_root / "nest").exists()
