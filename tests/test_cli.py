"""The installed ``kvmlab`` command: exit codes, one line per problem, never a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import LABS, ROOT

KVMLAB = str(Path(sys.executable).with_name("kvmlab"))


def kvmlab(*args: str) -> subprocess.CompletedProcess[str]:
    """Run the console script as a user would."""
    return subprocess.run([KVMLAB, *args], capture_output=True, text=True, timeout=60)


def test_help_lists_commands() -> None:
    proc = kvmlab("--help")
    assert proc.returncode == 0
    for command in ("check", "render", "doctor"):
        assert command in proc.stdout


def test_check_shipped_labs_ok() -> None:
    proc = kvmlab("check", *map(str, sorted(LABS.glob("*.toml"))))
    assert proc.returncode == 0, proc.stderr
    assert "labs/nested.toml: ok" in proc.stdout.replace(str(LABS), "labs")
    assert "L2 l1/l2" in proc.stdout


BAD_LABS = {
    "syntax.toml": ('name = "x"\n[guests.vm\n', "line 2, column 11: TOML syntax"),
    "unknown.toml": ('name = "x"\n[guests.vm]\nvcpu = 2\n', "guests.vm.vcpu: unknown key"),
    "type.toml": (
        'name = "x"\n[guests.vm]\nvcpus = "two"\n',
        "guests.vm.vcpus: 'two' is not a whole number",
    ),
    "impossible.toml": (
        'name = "x"\n[guests.vm]\nvcpus = 1\npinning = { vcpus = { 3 = "0" } }\n',
        "guests.vm.pinning.vcpus.3: vCPU 3 does not exist",
    ),
    "empty.toml": ("", "the file is empty"),
}


@pytest.mark.parametrize("name", sorted(BAD_LABS))
def test_bad_lab_one_line_per_problem_exit_2(name: str, tmp_path: Path) -> None:
    text, expected = BAD_LABS[name]
    lab = tmp_path / name
    lab.write_text(text)
    proc = kvmlab("check", str(lab))
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, lines
    assert lines[0] == f"kvmlab: {lab}: {expected}" or (
        lines[0].startswith(f"kvmlab: {lab}: ") and expected in lines[0]
    )


def test_missing_file_exit_2() -> None:
    proc = kvmlab("check", "/nonexistent/lab.toml")
    assert proc.returncode == 2
    assert proc.stderr.strip() == "kvmlab: /nonexistent/lab.toml: no such file"


def test_render_bad_lab_does_not_render(tmp_path: Path) -> None:
    lab = tmp_path / "bad.toml"
    lab.write_text('name = "x"\n[guests.vm]\nmachine = "q99"\n')
    proc = kvmlab("render", str(lab))
    assert proc.returncode == 2
    assert proc.stdout == ""


def test_render_qemu_and_libvirt() -> None:
    qemu = kvmlab("render", str(LABS / "nested.toml"), "--guest", "l1")
    assert qemu.returncode == 0, qemu.stderr
    assert "qemu-system-x86_64" in qemu.stdout
    assert "# accel auto -> " in qemu.stdout
    xml = kvmlab("render", str(LABS / "nested.toml"), "-o", "libvirt")
    assert xml.returncode == 0, xml.stderr
    assert xml.stdout.count("<domain ") == 2


def test_render_unknown_guest_exit_2() -> None:
    proc = kvmlab("render", str(LABS / "nested.toml"), "--guest", "nope")
    assert proc.returncode == 2
    assert "has no guest 'nope' (it has: l1, l1/l2)" in proc.stderr


def test_render_bad_format_is_usage_error() -> None:
    proc = kvmlab("render", str(LABS / "basic.toml"), "-o", "yaml")
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr


def test_reference_doc_is_generated() -> None:
    """docs/lab-reference.md is exactly what ``kvmlab check --explain --markdown`` prints."""
    proc = kvmlab("check", "--explain", "--markdown")
    assert proc.returncode == 0
    assert (ROOT / "docs" / "lab-reference.md").read_text() == proc.stdout, (
        "regenerate with: make docs"
    )
    assert "`guests.NAME.nics[].queues`" in proc.stdout


def test_doctor_on_recorded_intel_host_json() -> None:
    import json

    root = ROOT / "tests" / "host" / "fixtures" / "intel-nested-off"
    proc = kvmlab("doctor", "--root", str(root), "-o", "json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["accel"]["accel"] == "kvm"
    nested = next(f for f in report["findings"] if f["id"] == "kvm.nested")
    assert nested["status"] == "warn"
    assert any("nested=1" in fix for fix in nested["fix"])


@pytest.mark.skipif(not Path("/sys/module/kvm_pvm").exists(), reason="host KVM is not kvm_pvm")
def test_doctor_here_reports_pvm_and_tcg() -> None:
    proc = kvmlab("doctor")
    assert proc.returncode in (0, 1), proc.stderr
    assert "kvm_pvm" in proc.stdout
    assert "accelerator: TCG" in proc.stdout


@pytest.mark.parametrize(
    "command", [("migrate",), ("exits", "--guest", "vm", "--compare")], ids=str
)
def test_a_command_its_backend_does_not_run_is_refused_by_the_backend(
    command: tuple[str, ...], tmp_path: Path
) -> None:
    """The libvirt backend answers before anything starts (no daemon is asked)."""
    lab = tmp_path / "lv.toml"
    lab.write_text('backend = "libvirt"\n' + (LABS / "migrate.toml").read_text())
    args = [*command, str(lab)]
    run = kvmlab(*args)
    assert run.returncode == 2, run.stderr
    assert "runs only on the qemu backend so far" in run.stderr
