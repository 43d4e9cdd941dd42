"""The README's set-up and "Your own lab" quick starts run as a newcomer types them, in a
directory of their own: each command's arguments are taken from the README itself
(:func:`tests.readme.readme_line`), so the README cannot drift from the CLI. The heavier quick
starts are run as written by the tests of their area (``tests/test_readme_commands.py``
checks that every README command is run by some test, or says why not)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import KVMLAB, LABS
from tests.readme import readme_line

pytestmark = pytest.mark.functional

RUN_HERE = (
    "kvmlab doctor",
    "kvmlab labs",
    "kvmlab check my-lab.toml",
    "kvmlab render my-lab.toml -o libvirt",
    "kvmlab up my-lab.toml",
    "kvmlab exec basic/vm1 -- uname -r",
    "kvmlab ps",
    "kvmlab down basic",
)
"""The README commands this module runs as written."""


def run(env: dict[str, str], where: Path, args: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [KVMLAB, *args],
        capture_output=True,
        text=True,
        timeout=900,
        env=env,
        cwd=where,
        stdin=subprocess.DEVNULL,
    )


def test_the_set_up_and_your_own_lab_quick_starts_run_as_written(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "KVMLAB_RUN_DIR": str(tmp_path / "run"),
        "KVMLAB_RESULTS": str(tmp_path / "results.sqlite"),
    }
    here = tmp_path / "work"
    here.mkdir()
    doctor = run(env, here, readme_line("kvmlab doctor"))
    assert doctor.returncode in (0, 1), doctor.stderr  # 1: a check failed (this host lacks KVM)
    assert "accelerator:" in doctor.stdout
    labs = run(env, here, readme_line("kvmlab labs"))
    assert labs.returncode == 0 and "nested" in labs.stdout and "basic" in labs.stdout
    shutil.copy(LABS / "basic.toml", here / "my-lab.toml")  # the README's cp line
    checked = run(env, here, readme_line("kvmlab check my-lab.toml"))
    assert checked.returncode == 0 and "ok (lab basic)" in checked.stdout, checked.stderr
    rendered = run(env, here, readme_line("kvmlab render my-lab.toml"))
    assert rendered.returncode == 0 and "<domain" in rendered.stdout, rendered.stderr
    up = run(env, here, readme_line("kvmlab up my-lab.toml"))
    try:
        assert up.returncode == 0, up.stderr[-3000:]
        assert "lab basic is up" in up.stdout
        uname = run(env, here, readme_line("kvmlab exec basic/vm1"))
        assert uname.returncode == 0 and uname.stdout.strip(), uname.stderr
        ps = run(env, here, readme_line("kvmlab ps"))
        assert ps.returncode == 0 and "basic/vm1" in ps.stdout and "running" in ps.stdout
    finally:
        down = run(env, here, readme_line("kvmlab down basic"))
    assert down.returncode == 0, down.stderr
    assert (here / "disks" / "vm1.qcow2").is_file(), "a copied lab's disks are beside it"
