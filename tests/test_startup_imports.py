"""Every kvmlab command starts with what it needs, not more: inside a guest
hypervisor under TCG Python is ~10x slower, and each module a command imports for nothing
costs every command run there. A command's run is watched from the modules it imported."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import LABS, ROOT

RUN = """
import json, sys
from kvmlab.cli.main import main
sys.argv = ["kvmlab", *json.loads(sys.argv[1])]
try:
    main()
except SystemExit as exc:
    assert exc.code in (0, None), exc.code
print(json.dumps(sorted(sys.modules)), file=sys.stderr)
"""

LAB_MODELS = "kvmlab.spec.lab"
TUNING = ("kvmlab.net.tune", "kvmlab.net.tunestate")
RENDERERS = ("kvmlab.render.argv", "kvmlab.render.target", "kvmlab.render.libvirt")
BACKENDS = ("kvmlab.runtime.backends", "kvmlab.runtime.lab", "kvmlab.runtime.machine")


def imported(tmp_path: Path, *args: str, state: Path | None = None) -> set[str]:
    env = {
        **os.environ,
        "KVMLAB_RUN_DIR": str(tmp_path / "run"),
        "KVMLAB_TUNING_STATE": str(state or tmp_path / "no-state.json"),
    }
    proc = subprocess.run(
        [sys.executable, "-c", RUN, json.dumps(args)],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    return set(json.loads(proc.stderr.splitlines()[-1]))


def test_ps_reads_run_directories_and_nothing_more(tmp_path: Path) -> None:
    modules = imported(tmp_path, "ps", "-o", "json")
    unwanted = {LAB_MODELS, *TUNING, *RENDERERS, *BACKENDS, "rich.console", "pydantic"} & modules
    assert not unwanted


def test_help_does_not_import_the_validation_library(tmp_path: Path) -> None:
    """typer 0.29 imports pydantic to parse any option (deps/constraints.txt keeps 0.28)."""
    assert "pydantic" not in imported(tmp_path, "--help")
    assert "pydantic" not in imported(tmp_path, "libvirtd", "start", "--help")


def test_check_loads_the_lab_models_but_no_renderer_nor_backend(tmp_path: Path) -> None:
    modules = imported(tmp_path, "check", str(LABS / "nested.toml"))
    assert LAB_MODELS in modules
    assert not {*TUNING, *RENDERERS, *BACKENDS} & modules


def test_tuning_state_is_read_only_when_there_is_one(tmp_path: Path) -> None:
    """No file: one lstat, nothing imported. A file: read (this one is refused, in one
    line), and the rollback machinery is not imported for a state it will not roll back."""
    state = tmp_path / "state.json"
    state.write_text("not json")
    state.chmod(0o600)
    modules = imported(tmp_path, "ps", "-o", "json", state=state)
    assert "kvmlab.net.tunestate" in modules
    assert "kvmlab.net.tune" not in modules


@pytest.mark.parametrize("args", [["--help"], ["check", "--help"]])
def test_help_imports_no_model(tmp_path: Path, args: list[str]) -> None:
    modules = imported(tmp_path, *args)
    assert not {LAB_MODELS, *TUNING, *RENDERERS, *BACKENDS} & modules


def test_exec_s_module_needs_no_qmp() -> None:
    """exec talks to the guest agent only: QMP's client (asyncio) is imported when used."""
    probe = "import sys, kvmlab.cli.exec_cmds; print(sorted(sys.modules))"
    proc = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    modules = set(json.loads(proc.stdout.replace("'", '"')))
    assert {
        "asyncio",
        "qemu.qmp",
        "kvmlab.runtime.qemu.qmp",
        "kvmlab.guest.image",
    } & modules == set()
