"""The default image's init refuses a bad kernel command line word before it mounts
anything, and ``kvmlab up`` says why: ``kvmlab.cache`` takes ``mmap`` or ``loose`` (its
value reaches a ``mount`` option otherwise)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import cli
from tests.runtime.conftest import qemu_pids

pytestmark = pytest.mark.functional

LAB = """
name = "badcache"
description = "A guest whose kernel command line names a 9p cache mode init refuses"

[guests.vm]
memory = "512M"
append = "kvmlab.cache=bogus,trans=tcp"
"""


def test_a_cache_mode_init_does_not_know_fails_the_boot_naming_both(tmp_path: Path) -> None:
    lab = tmp_path / "badcache.toml"
    lab.write_text(LAB)
    env = {**os.environ, "KVMLAB_RUN_DIR": str(tmp_path / "run")}
    up = cli(env, "up", str(lab), timeout=600)
    try:
        assert up.returncode == 3, up.stderr[-3000:]
        assert "the guest's init failed" in up.stderr
        assert "kvmlab.cache=bogus,trans=tcp: use mmap or loose" in up.stderr
        assert "root mounted" not in up.stderr  # refused before the share was mounted
    finally:
        cli(env, "down", "badcache", timeout=300)
    assert not qemu_pids(str(tmp_path / "run"))
