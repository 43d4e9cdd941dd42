"""A file that is not a tuning state kvmlab wrote is never suggested for removal.

``KVMLAB_TUNING_STATE=/etc/passwd kvmlab ps`` once said of /etc/passwd "restore by hand
what it lists, if kvmlab wrote it, then remove it". A file that is not kvmlab's record at
all (not a regular file of this user's, not JSON, not an object of the record's shape) is
named as not kvmlab's tuning state, left as it is, and the fix is to point
KVMLAB_TUNING_STATE at kvmlab's own file. Only a record of kvmlab's shape whose values
kvmlab will not trust keeps the restore-by-hand advice (tests/net/test_bad_tuning_state_file.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kvmlab.net.tunestate import State, TuningStateError

KVMLAB = str(Path(sys.executable).with_name("kvmlab"))
FOREIGN_END = (
    "so it is not kvmlab's tuning state; kvmlab leaves it as it is and writes nothing from "
    "it: set KVMLAB_TUNING_STATE to name kvmlab's own tuning state file"
)


def kvmlab(state: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KVMLAB_TUNING_STATE": str(state), "COLUMNS": "200"}
    return subprocess.run(
        [KVMLAB, *args],
        capture_output=True,
        text=True,
        timeout=30,
        stdin=subprocess.DEVNULL,
        env=env,
    )


def test_etc_passwd_is_named_not_kvmlabs_and_never_suggested_for_removal(tmp_path: Path) -> None:
    """``KVMLAB_TUNING_STATE=/etc/passwd kvmlab ps`` itself: /etc/passwd is read (not JSON
    as root, another user's file otherwise), named as not kvmlab's, and left exactly as it
    was."""
    env = {"KVMLAB_RUN_DIR": str(tmp_path / "run"), "KVMLAB_RESULTS": str(tmp_path / "r.db")}
    passwd = Path("/etc/passwd")
    before = passwd.read_bytes()
    proc = subprocess.run(
        [KVMLAB, "ps"],
        capture_output=True,
        text=True,
        timeout=30,
        stdin=subprocess.DEVNULL,
        env={**os.environ, **env, "KVMLAB_TUNING_STATE": str(passwd)},
    )
    assert proc.returncode == 0, proc.stderr
    (line,) = proc.stderr.splitlines()
    assert line.startswith("kvmlab: /etc/passwd: ")
    assert line.endswith(FOREIGN_END)
    assert "remove" not in line and "restore" not in line
    assert passwd.read_bytes() == before


FOREIGN = {
    "not-json": ("root:x:0:0:root:/root:/bin/bash\n", "not JSON"),
    "deep": ("[" * 100_000, "not JSON"),
    "null": ("null", "not a JSON object"),
    "number": ("5", "not a JSON object"),
    "other-object": ('{"name": "app", "version": 3}', "owner is missing"),
    "changes-5": ('{"owner": null, "root": "/", "changes": 5}', "changes has the wrong form"),
    "owner-empty": ('{"owner": [], "root": "/", "changes": []}', "owner.0 is missing"),
    "missing-root": ('{"owner": null, "changes": []}', "root is missing"),
    "extra-key": (
        '{"owner": null, "root": "/", "changes": [], "users": []}',
        "users is not a key of kvmlab's tuning state",
    ),
    "change-not-object": (
        '{"owner": null, "root": "/", "changes": [5]}',
        "changes.0 is not a JSON object",
    ),
}


@pytest.mark.parametrize("case", sorted(FOREIGN))
def test_content_not_of_kvmlabs_shape_is_left_alone(case: str, tmp_path: Path) -> None:
    content, why = FOREIGN[case]
    path = tmp_path / "t.json"
    path.write_text(content)
    path.chmod(0o600)
    with pytest.raises(TuningStateError) as caught:
        State(path).read()
    assert caught.value.foreign
    assert str(caught.value) == f"{path}: {why}, {FOREIGN_END}"
    assert path.read_text() == content


def test_the_cli_says_so_in_one_line_and_goes_on(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text('{"name": "app"}')
    path.chmod(0o600)
    proc = kvmlab(path, "ps")
    assert proc.returncode == 0, proc.stderr
    (line,) = proc.stderr.splitlines()
    assert line == f"kvmlab: {path}: owner is missing, {FOREIGN_END}"


def test_tune_rollback_refuses_it_without_suggesting_removal(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text("not json at all")
    path.chmod(0o600)
    proc = kvmlab(path, "tune", "rollback")
    assert proc.returncode == 2
    (line,) = proc.stderr.splitlines()
    assert line == f"kvmlab: {path}: not JSON, {FOREIGN_END}"
    assert path.read_text() == "not json at all"


def test_a_file_of_another_owner_or_mode_is_not_suggested_for_removal(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"owner": None, "root": "/", "changes": []}))
    path.chmod(0o666)
    with pytest.raises(TuningStateError) as caught:
        State(path).read()
    assert caught.value.foreign
    assert "remove" not in str(caught.value)


@pytest.mark.parametrize("kind", ["directory", "fifo", "symlink"])
def test_what_is_not_a_regular_file_is_not_suggested_for_removal(kind: str, tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    if kind == "directory":
        path.mkdir()
    elif kind == "fifo":
        os.mkfifo(path, 0o600)
    else:
        path.symlink_to("/etc/passwd")
    with pytest.raises(TuningStateError) as caught:
        State(path).read()
    assert caught.value.foreign
    assert str(caught.value).endswith(FOREIGN_END)


def test_a_record_of_kvmlabs_shape_with_untrusted_values_keeps_the_restore_advice(
    tmp_path: Path,
) -> None:
    path = tmp_path / "t.json"
    change = {"name": "x", "path": "etc/shadow", "original": "1", "wanted": "0"}
    path.write_text(json.dumps({"owner": None, "root": "/", "changes": [change]}))
    path.chmod(0o600)
    with pytest.raises(TuningStateError) as caught:
        State(path).read()
    assert not caught.value.foreign
    assert "restore by hand what it lists, if kvmlab wrote it, then remove it" in str(caught.value)
