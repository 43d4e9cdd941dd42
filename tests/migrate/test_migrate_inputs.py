"""Bad input to kvmlab migrate is refused before anything starts, one line, exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvmlab.errors import SpecError
from kvmlab.spec import load_lab
from tests.conftest import LABS
from tests.test_cli_exits import in_process


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["migrate"], "give the guest to migrate (LAB/GUEST, as kvmlab ps shows it), or a LAB"),
        (["migrate", "basic/vm1", "--lab", "x.toml"], "give the lab as the argument"),
        (["migrate", "basic/vm1", "--reps", "3"], "--variant, --reps and --out go with a LAB"),
        (["migrate", "basic/vm1", "--mode", "teleport"], "unknown migration mode 'teleport'"),
        (
            ["migrate", "basic/vm1", "--auto", "--mode", "postcopy"],
            "the automatic choice is a mode: --mode auto",
        ),
        (["migrate", "basic/vm1", "--downtime-limit", "0"], "--downtime-limit must be"),
        (["migrate", "basic/vm1", "--bandwidth", "-1"], "--bandwidth must be"),
        (["migrate", "basic/vm1", "--dirty-mem", "0"], "--dirty-mem must be"),
        (["migrate", "basic/vm1", "--dirty", "-5"], "--dirty must be"),
        (["migrate", "basic/vm1", "--on-timeout", "wait"], "--on-timeout must be"),
        (["migrate", "basic/vm1", "--qemu", "qemu-system-x86_64"], "--qemu must be an absolute"),
        (["migrate", "basic/vm1", "--transport", "rdma"], "--transport must be tcp or unix"),
        (["migrate", "../etc"], "../etc: no such file"),
        (["migrate", "basic"], "basic.toml declares no [[migrations]]"),
        (["migrate", "nosuchlab"], "is neither a lab file nor a lab shipped with kvmlab"),
        (["migrate", "basic/vm1/inner"], "top-level guests only"),
        (["migrate", "basic/vm1"], "basic/vm1 is not up"),
    ],
)
def test_refused(
    args: list[str], message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KVMLAB_RUN_DIR", str(tmp_path / "run"))
    assert message in in_process(2, *args)


def test_lab_without_migrations_is_refused(tmp_path: Path) -> None:
    assert "declares no [[migrations]]" in in_process(2, "migrate", str(LABS / "basic.toml"))


def test_migrations_must_name_a_migratable_guest(tmp_path: Path) -> None:
    lab = tmp_path / "m.toml"
    lab.write_text(
        'name = "m"\n[guests.vm]\n[guests.other]\nmigratable = true\n'
        '[[migrations]]\nname = "a"\nguest = "vm"\n'
        '[[migrations]]\nname = "a"\nguest = "other"\n'
        '[[migrations]]\nname = "c"\nguest = "nope"\n'
    )
    with pytest.raises(SpecError) as info:
        load_lab(lab)
    found = {p.path: p.message for p in info.value.problems}
    assert "migratable = true" in found["migrations[0].guest"]
    assert "another migration is named 'a'" in found["migrations[1].name"]
    assert "no top-level guest 'nope'" in found["migrations[2].guest"]


def test_shipped_migration_lab_is_valid() -> None:
    loaded = load_lab(LABS / "migrate.toml")
    assert [m.name for m in loaded.lab.migrations][:2] == ["qemu-default", "kvmlab-auto"]
    assert loaded.variant_named("one-vcpu").lab.guests["vm"].vcpus == 1
    assert load_lab(LABS / "migrate.toml").variant_named("one-vcpu").lab.guests["vm"].migratable
