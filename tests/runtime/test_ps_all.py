"""``kvmlab ps --all`` as a user runs it: a QEMU started by hand (not by kvmlab) is listed
with the name ``exits`` takes it by, its -name, its accelerator and its host CPU; kvmlab
neither signals nor changes it."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

from tests.conftest import cli
from tests.readme import readme_line


def test_ps_all_lists_a_qemu_kvmlab_did_not_start(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [
            "bash",
            "-c",
            "exec -a qemu-system-x86_64 /usr/bin/python3 -c 'import time; time.sleep(60)' "
            "-name guest=handmade,debug-threads=on -accel tcg",
        ]
    )
    try:
        deadline = time.monotonic() + 30
        while not Path(f"/proc/{proc.pid}/cmdline").read_bytes().startswith(b"qemu"):
            assert time.monotonic() < deadline
            time.sleep(0.01)
        env = {**os.environ, "KVMLAB_RUN_DIR": str(tmp_path / "run")}
        shown = cli(env, *readme_line("kvmlab ps --all"))
        assert shown.returncode == 0, shown.stderr
        line = next(x for x in shown.stdout.splitlines() if x.startswith(f"pid:{proc.pid} "))
        assert line.split()[1:4] == ["other", str(proc.pid), "handmade"]
        assert "unknown" in line  # no agent kvmlab can reach: guest CPU unknown
        doc = json.loads(cli(env, "ps", "--all", "-o", "json").stdout)
        row = next(r for r in doc["others"] if r["pid"] == proc.pid)
        assert row["target"] == f"pid:{proc.pid}" and row["accel"] == "tcg"
        assert proc.poll() is None  # untouched
        plain = json.loads(cli(env, "ps", "-o", "json").stdout)
        assert "others" not in plain  # without --all: kvmlab's guests only
        # the README's exits on a VM kvmlab did not start, on this one: under TCG it has no
        # VM exits, and kvmlab says so and what to run instead, touching nothing
        exits = [a.replace("4242", str(proc.pid)) for a in readme_line("kvmlab exits pid:")]
        profiled = cli(env, *exits)
        assert profiled.returncode == 4, profiled.stderr
        assert f"pid:{proc.pid} (handmade) runs under tcg" in profiled.stderr
        assert "kvmlab exits --host-profile" in profiled.stderr
        assert proc.poll() is None
    finally:
        proc.kill()
        proc.wait()
