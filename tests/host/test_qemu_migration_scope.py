"""The doctor's migration finding is scoped to what kvmlab measured:
QEMU 7.2 and 10.0 under TCG, with the command and date the figures come from; any other
version is "not measured", not assumed broken because it is below 8.0."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvmlab.host.checks_tools import check_qemu_migration
from kvmlab.host.findings import Status
from kvmlab.host.probe import HostProbe


def probe_with(tmp_path: Path, version: str) -> HostProbe:
    commands = tmp_path / ".commands"
    commands.mkdir()
    (commands / "qemu-system-x86_64_--version.txt").write_text(
        f"QEMU emulator version {version} (Debian)\n"
    )
    return HostProbe(tmp_path)


def test_the_measured_broken_version_warns_with_its_source_and_scope(tmp_path: Path) -> None:
    found = check_qemu_migration(probe_with(tmp_path, "7.2.9"))
    assert found.status == Status.WARN
    assert "15 of 15" in found.summary and "2-vCPU TCG guest" in found.summary
    assert "kvmlab migrate migrate" in found.summary
    assert "under KVM and for other versions: not measured" in found.summary


@pytest.mark.parametrize("version", ["6.2.0", "7.0.0", "7.1.0", "8.2.2", "9.2.0"])
def test_other_versions_are_not_measured(version: str, tmp_path: Path) -> None:
    found = check_qemu_migration(probe_with(tmp_path, version))
    assert found.status == Status.INFO
    assert "not measured" in found.summary
    assert "15 of 15" not in found.summary


def test_the_measured_good_version_is_ok_with_its_source(tmp_path: Path) -> None:
    found = check_qemu_migration(probe_with(tmp_path, "10.0.2"))
    assert found.status == Status.OK
    assert "25 of 25" in found.summary and "2026-11-23" in found.summary
