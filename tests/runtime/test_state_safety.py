"""Names, run-root checks, confined removal and crash-safe records, without booting guests.

Stand-in QEMUs are ``sh`` processes whose command line names ``qemu-system`` and a run
directory, as a real QEMU's does; nothing outside the test's temporary directory is touched.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kvmlab.errors import StateError, UsageError
from kvmlab.proc.confined import MARKER, checked_run_root, remove_owned, write_private
from kvmlab.proc.processes import alive, find_marked, start_time
from kvmlab.progress import QUIET
from kvmlab.runtime import lab as labrun
from kvmlab.runtime.rundir import GuestRecord, LabDir
from kvmlab.spec.names import lab_name, parse_address
from tests.runtime.conftest import kvmlab

BAD_NAMES = ["", ".", "..", "/etc", "/tmp/somedir", "a/b", "A", "-x", "x" * 33, "a\nb", "a b"]


@pytest.mark.parametrize("name", BAD_NAMES)
def test_bad_lab_names_are_refused(name: str) -> None:
    with pytest.raises(UsageError, match="is not a lab name"):
        lab_name(name)


@pytest.mark.parametrize(
    "address",
    [
        "basic",
        "basic/",
        "/basic/vm1",
        "../kvmlab/basic/vm1",
        "basic/vm1/../vm1",
        "basic//vm1",
        "basic/./vm1",
        "a" * 300 + "/vm",
        "basic/vm1/",
        "b/c/d/e/f/g",
    ],
)
def test_bad_addresses_are_refused(address: str) -> None:
    with pytest.raises(UsageError, match="is not a guest address"):
        parse_address(address)


def test_good_addresses_parse() -> None:
    assert parse_address("nested/l1/l2") == ("nested", ("l1", "l2"))
    assert parse_address("basic/vm1") == ("basic", ("vm1",))


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    run = tmp_path / "run"
    monkeypatch.setenv("KVMLAB_RUN_DIR", str(run))
    return run


def test_down_never_touches_what_its_argument_names(root: Path, tmp_path: Path) -> None:
    victim = tmp_path / "somedir"
    victim.mkdir()
    (victim / "keep").write_text("x")
    sibling = tmp_path / "sibling"
    sibling.mkdir()
    tmp_path.chmod(0o755)
    for name in (str(victim), "..", "", "../sibling", ".", "run"):
        result = kvmlab("down", name, timeout=60)
        assert result.returncode == 2, (name, result.stdout, result.stderr)
        assert result.stderr.count("\n") == 1, result.stderr
    assert (victim / "keep").read_text() == "x" and sibling.is_dir()
    assert oct(tmp_path.stat().st_mode & 0o777) == "0o755"


def test_run_root_must_be_private_and_kvmlab_s(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    (foreign / "lab").mkdir()
    open_dir = tmp_path / "open"
    open_dir.mkdir()
    open_dir.chmod(0o777)
    for path, words in (
        (foreign, "did not create"),
        (open_dir, "nobody else can write"),
        (Path("relative"), "absolute"),
    ):
        monkeypatch.setenv("KVMLAB_RUN_DIR", str(path))
        with pytest.raises(StateError, match=words):
            checked_run_root()
        result = kvmlab("down", "lab", timeout=60)
        assert result.returncode == 2 and words in result.stderr, result.stderr
    assert (foreign / "notes.txt").read_text() == "mine" and (foreign / "lab").is_dir()
    assert oct(open_dir.stat().st_mode & 0o777) == "0o777"


def test_run_root_owned_by_someone_else_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to chown")
    other = tmp_path / "other"
    other.mkdir(mode=0o755)
    os.chown(other, 65534, 65534)
    monkeypatch.setenv("KVMLAB_RUN_DIR", str(other / "kvmlab"))
    with pytest.raises(StateError, match="belongs to uid 65534"):
        checked_run_root()
    assert not (other / "kvmlab").exists()


def test_removal_is_confined_to_marked_directories(root: Path, tmp_path: Path) -> None:
    lab = LabDir.of("lab")
    with lab.locked():
        guest = lab.create_guest_dir(["vm"])
        outside = tmp_path / "outside"
        outside.mkdir()
        (outside / MARKER).write_text("forged\n")
        (lab.root / "link").symlink_to(outside)
        (lab.root / "unmarked").mkdir()
        (lab.root / "user-file").write_text("x")
        for path, words in (
            (lab.root / "link", "symlink"),
            (outside, "outside the run root"),
            (lab.root / "unmarked", "did not create"),
            (root, "not a directory below"),
        ):
            with pytest.raises(StateError, match=words):
                remove_owned(path)
        (guest / "escape").symlink_to(outside)
        lab.clear()
        assert not guest.exists() and outside.is_dir() and (outside / MARKER).exists()
        assert (lab.root / "unmarked").is_dir() and (lab.root / "user-file").exists()
    assert root.is_dir()


def test_state_files_are_private(root: Path) -> None:
    lab = LabDir.of("lab")
    with lab.locked():
        lab.write_info(Path("/labs/lab.toml"), "digest")
        guest = lab.create_guest_dir(["vm"])
        record(pid=0).save(guest)
        write_private(guest / "x", "y")
        for path in (lab.root / "lab.json", guest / "guest.json", guest / "x"):
            assert oct(path.stat().st_mode & 0o777) == "0o600", path
        for path in (root, lab.root, guest):
            assert oct(path.stat().st_mode & 0o777) == "0o700", path


def record(**changes: object) -> GuestRecord:
    base = GuestRecord(
        lab="lab",
        address=["vm"],
        pid=0,
        argv=["qemu-system-x86_64"],
        accel="tcg",
        accel_reason="test",
        vcpus=1,
        memory=1 << 29,
        started=time.time(),
        state="launching",
    )
    for key, value in changes.items():
        setattr(base, key, value)
    return base


def looks_like_qemu(*args: str) -> subprocess.Popen[bytes]:
    """A sleeping process whose command line is ``qemu-system-x86_64 ARGS`` (its first word
    the program's name, as a real QEMU's is)."""
    return subprocess.Popen(
        ["qemu-system-x86_64", "-c", "import time; time.sleep(60)", *args],
        executable=sys.executable,
        start_new_session=True,
    )


@pytest.fixture
def fake_qemu(root: Path) -> Iterator[subprocess.Popen[bytes]]:
    """A process whose command line looks like a QEMU of lab/vm (as a real one's does)."""
    guest = root / "lab" / "vm"
    proc = looks_like_qemu(f"{guest}/qmp.sock")
    yield proc
    proc.kill()
    proc.wait()


def test_identity_is_pid_and_start_time(fake_qemu: subprocess.Popen[bytes]) -> None:
    started = start_time(fake_qemu.pid)
    assert started is not None and alive(fake_qemu.pid, None, started)
    assert not alive(fake_qemu.pid, None, started + 1)  # a recycled pid starts later
    assert not alive(fake_qemu.pid, "/some/other/run/dir", started)


@pytest.mark.parametrize("state_file", ["pid0", "garbage", "bad-name", "missing"])
def test_down_finds_unrecorded_qemu(
    root: Path, fake_qemu: subprocess.Popen[bytes], state_file: str
) -> None:
    """kvmlab killed between spawn and record, or state mangled: ps and down still see it."""
    lab = LabDir.of("lab")
    with lab.locked():
        guest = lab.create_guest_dir(["vm"])
        if state_file == "pid0":
            record(pid=0, owner=999999).save(guest)
        elif state_file == "garbage":
            (guest / "guest.json").write_text("{not json")
        elif state_file == "bad-name":
            (guest / "guest.json").write_text(json.dumps({**record().__dict__, "lab": "../x"}))
    time.sleep(0.1)
    assert find_marked(f"{guest}/") == [fake_qemu.pid]
    [entry] = lab.entries()
    assert entry.state() == ("orphaned" if state_file == "pid0" else "unreadable")
    assert entry.processes() == [fake_qemu.pid]
    with pytest.raises(StateError, match="already up"):
        labrun.assert_not_up("lab")
    stopped = labrun.down("lab", progress=QUIET)
    assert stopped == ["lab/vm"]
    assert fake_qemu.wait(10) is not None
    assert not lab.root.exists() and root.is_dir()


def test_a_recycled_pid_is_never_signalled(root: Path) -> None:
    """A record naming a live process that is not its QEMU (pid reused): left alone."""
    bystander = subprocess.Popen(["sleep", "60"])
    try:
        lab = LabDir.of("lab")
        with lab.locked():
            guest = lab.create_guest_dir(["vm"])
            started = start_time(bystander.pid)
            assert started is not None
            record(pid=bystander.pid, pid_start=started - 5, state="running").save(guest)
        [entry] = lab.entries()
        assert entry.state() == "dead" and entry.processes() == []
        assert labrun.down("lab") == []
        assert bystander.poll() is None
    finally:
        bystander.kill()
        bystander.wait()


def test_records_with_foreign_names_are_unreadable(root: Path) -> None:
    lab = LabDir.of("lab")
    with lab.locked():
        guest = lab.create_guest_dir(["vm"])
        (guest / "guest.json").write_text(json.dumps({**record().__dict__, "address": [".."]}))
    [entry] = lab.entries()
    assert entry.record is None and "invalid lab or guest" in str(entry.problem)


@pytest.mark.parametrize("recorded", [False, True], ids=["found-by-command-line", "recorded"])
def test_a_program_that_names_the_run_directory_is_no_qemu(root: Path, recorded: bool) -> None:
    """``grep qemu-system RUN/lab/vm/qemu.log`` or ``tail -f RUN/lab/vm/serial.log`` name
    the guest's run directory (and even QEMU) without being its QEMU: neither a scan nor a
    record naming its pid without a start time gets it signalled by ``down``."""
    lab = LabDir.of("lab")
    with lab.locked():
        guest = lab.create_guest_dir(["vm"])
    reader = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)", "qemu-system", f"{guest}/qemu.log"],
        start_new_session=True,
    )
    try:
        with lab.locked():
            rec = record(pid=reader.pid) if recorded else record(pid=0, owner=999999)
            rec.pid_start = None
            rec.save(guest)
        time.sleep(0.1)
        assert find_marked(f"{guest}/") == []
        labrun.down("lab", progress=QUIET)
        assert reader.poll() is None, "a program that only names the run directory was killed"
    finally:
        reader.kill()
        reader.wait()


def test_a_qemu_of_another_run_root_is_not_ours(root: Path, tmp_path: Path) -> None:
    """/run/kvmlab/lab/vm/ is inside /srv/ci/run/kvmlab/lab/vm/: a path must start a token."""
    other = tmp_path / "b" / str(root).lstrip("/") / "lab" / "vm"
    proc = looks_like_qemu(f"path={other}/qmp.sock")
    try:
        lab = LabDir.of("lab")
        with lab.locked():
            guest = lab.create_guest_dir(["vm"])
            record(pid=0, owner=999999).save(guest)
        time.sleep(0.1)
        assert find_marked(f"{guest}/") == []
        assert find_marked(f"{other}/") == [proc.pid]
        [entry] = lab.entries()
        assert entry.state() == "dead"
        assert labrun.down("lab") == []
        assert proc.poll() is None, "another run root's QEMU was left alone"
    finally:
        proc.kill()
        proc.wait()


def test_a_directory_kvmlab_did_not_create_is_never_adopted(root: Path) -> None:
    checked_run_root()
    project = root / "proj"
    (project / "src").mkdir(parents=True)
    (project / ".lock").touch()
    (project / "src" / "main.c").write_text("important")
    result = kvmlab("down", "proj", timeout=60)
    assert result.returncode == 2 and "did not create" in result.stderr, result.stderr
    assert (project / "src" / "main.c").read_text() == "important"


def test_removal_stops_at_mount_points(root: Path, tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to mount")
    decoy = tmp_path / "decoy"
    (decoy / "sub").mkdir(parents=True)
    (decoy / "sub" / "f").write_text("keep")
    lab = LabDir.of("lab")
    with lab.locked():
        guest = lab.create_guest_dir(["vm"])
        (guest / "hostview").mkdir()
        subprocess.run(["mount", "--bind", str(decoy), str(guest / "hostview")], check=True)
        try:
            with pytest.raises(StateError, match="is a mount point"):
                remove_owned(guest)
        finally:
            subprocess.run(["umount", str(guest / "hostview")], check=True)
    assert (decoy / "sub" / "f").read_text() == "keep"


def test_a_fifo_or_symlink_in_the_state_never_hangs_or_follows(root: Path) -> None:
    lab = LabDir.of("lab")
    with lab.locked():
        guest = lab.create_guest_dir(["vm"])
        os.mkfifo(guest / "guest.json")
    [entry] = lab.entries()  # returns at once
    assert entry.record is None and "not a regular file" in str(entry.problem)
    (lab.root / ".lock").unlink()
    (lab.root / ".lock").symlink_to("/etc/passwd")
    with pytest.raises(StateError, match="never follows a symlink"), lab.locked():
        pass


def test_control_characters_from_files_are_escaped_in_errors(tmp_path: Path) -> None:
    lab = tmp_path / "bad.toml"
    lab.write_text('name = "x"\n[guests."vm1\\n\\u001b[31m"]\n')
    result = kvmlab("check", str(lab), timeout=60)
    assert result.returncode == 2
    assert "\x1b" not in result.stderr and result.stderr.count("\n") == 1, result.stderr


def test_down_of_a_guest_whose_libvirt_is_unreachable_fails_once_and_keeps_state(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The daemon is asked once, before anything is stopped; nothing is signalled (its QEMU
    is the daemon's, pid 0 on record here) and the run state stays for a later down."""
    from kvmlab.runtime.libvirt import conn

    calls: list[str] = []

    def refuse(uri: str, name: str = "") -> None:
        calls.append(uri)
        raise conn.LibvirtFailure("cannot connect", uri, name)

    monkeypatch.setattr("kvmlab.runtime.libvirt.machine.open_uri", refuse)
    terminated: list[int] = []
    monkeypatch.setattr(labrun, "terminate", lambda pid, *a, **k: terminated.append(pid))
    lab = LabDir.of("lab")
    with lab.locked():
        lab.write_info(Path("/labs/lab.toml"), "digest")
        guest = lab.create_guest_dir(["vm"])
        fields = {"uri": "qemu+tcp://192.0.2.1/system", "domain": "u", "token": "t"}
        record(state="running", backend="libvirt", backend_fields=fields).save(guest)
    with pytest.raises(conn.LibvirtFailure, match="cannot connect"):
        labrun.down("lab")
    assert calls == ["qemu+tcp://192.0.2.1/system"], "asked once"
    assert terminated == [], "a daemon's QEMU is never signalled by kvmlab"
    assert (guest / "guest.json").exists(), "the state is kept for a later down"
