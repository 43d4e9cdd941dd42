"""``kvmlab check`` and the other commands run as a user would (the installed command, 200
columns, no terminal), for the tests of what a lab file may not say."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

KVMLAB = str(Path(sys.executable).with_name("kvmlab"))

HEAD = 'name = "x"\n[guests.vm]\n'
"""A lab of one guest, ``vm``: the keys a test writes next are that guest's."""
FWD = '{{ type = "user", forwards = [{{ host_port = 2222, guest_port = 22{addr} }}] }}'
"""A user NIC forwarding host port 2222 (``addr``: its host_addr, or empty)."""


def kvmlab(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200"}
    return subprocess.run(
        [KVMLAB, *args],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        env=env,
    )


def check(lab: Path) -> subprocess.CompletedProcess[str]:
    return kvmlab("check", str(lab))


def refused(tmp_path: Path, text: str | bytes) -> tuple[Path, str]:
    """The one line ``check`` refuses the lab ``text`` with (its file's path first)."""
    lab = tmp_path / "lab.toml"
    lab.write_bytes(text if isinstance(text, bytes) else text.encode())
    proc = check(lab)
    assert proc.returncode == 2, proc.stdout
    assert "Traceback" not in proc.stderr
    (line,) = proc.stderr.splitlines()
    return lab, line
