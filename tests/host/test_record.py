"""Recording a tree: what the checks read is written, trimmed, and reads back the same."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvmlab.errors import UsageError
from kvmlab.host.accel import choose_accel
from kvmlab.host.doctor import run_checks
from kvmlab.host.record import main, record_tree

from .trees import TREES


@pytest.mark.parametrize("tree", TREES, ids=lambda p: p.name)
def test_recording_a_tree_gives_the_same_findings(tree: Path, tmp_path: Path) -> None:
    dest = tmp_path / "copy"
    record_tree(dest, root=tree, processors=1)
    assert run_checks(dest) == run_checks(tree)
    assert choose_accel(dest) == choose_accel(tree)
    assert (dest / "proc/cpuinfo").read_text().count("processor\t:") == 1


def test_recording_refuses_a_non_empty_directory(tmp_path: Path) -> None:
    (tmp_path / "x").write_text("")
    with pytest.raises(UsageError):
        record_tree(tmp_path, root=TREES[0])
    assert main([str(tmp_path), "--root", str(TREES[0])]) == 2


def test_recording_trims_init_arguments(tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "proc").mkdir(parents=True)
    (src / "proc/cmdline").write_text("ro quiet -- --secret-init-arg\n")
    (src / "proc/mounts").write_text(
        "proc /proc proc rw 0 0\nserver:/x /mnt nfs rw 0 0\nnone /dev/hugepages hugetlbfs rw 0 0\n"
    )
    dest = tmp_path / "dest"
    record_tree(dest, root=src)
    assert (dest / "proc/cmdline").read_text() == "ro quiet\n"
    assert "nfs" not in (dest / "proc/mounts").read_text()
    assert "hugetlbfs" in (dest / "proc/mounts").read_text()
