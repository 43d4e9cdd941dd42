"""``kvmlab exec`` and ``kvmlab console`` end to end, without booting a guest.

The "guest" is the host's own qemu-ga listening on the agent socket of a run directory
made the way ``kvmlab up`` makes one (its pid stands in for QEMU's), so the CLI, the agent
client and the real agent's guest-exec are all exercised in a second. Commands run on the
host: they only sleep, cat, count and write below the test's tmp_path. The console socket
is a small server standing in for QEMU's chardev.
"""

from __future__ import annotations

import os
import pty
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pytest

from kvmlab.cli.console import CONNECTED
from kvmlab.guest.agent import MAX_INPUT, MAX_OUTPUT
from kvmlab.proc.confined import checked_run_root, create_owned
from kvmlab.proc.processes import start_time
from kvmlab.render.runfiles import AGENT_SOCKET, CONSOLE_SOCKET
from kvmlab.runtime.rundir import GuestRecord, LabDir
from tests.runtime.conftest import KVMLAB, wait_for

from .host_agent import start_host_agent, stop

pytestmark = [
    pytest.mark.functional,
    pytest.mark.skipif(shutil.which("qemu-ga") is None, reason="qemu-guest-agent not installed"),
]

ADDRESS = "hostga/vm"


@pytest.fixture
def guest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A running "guest" ``hostga/vm`` whose agent is the host's qemu-ga; its run dir."""
    monkeypatch.setenv("KVMLAB_RUN_DIR", str(tmp_path / "run"))
    checked_run_root()
    lab = LabDir.of("hostga")
    create_owned(lab.root, "lab hostga")
    run_dir = lab.create_guest_dir(("vm",))
    state = tmp_path / "qga"
    state.mkdir()
    proc = start_host_agent(run_dir / AGENT_SOCKET, state, as_qemu=True)
    try:
        wait_for(run_dir / AGENT_SOCKET, 10)
        GuestRecord(
            lab="hostga",
            address=["vm"],
            pid=proc.pid,
            argv=["qemu-ga"],
            accel="tcg",
            accel_reason="the host's qemu-ga stands in",
            vcpus=1,
            memory=1 << 30,
            started=time.time(),
            marker=str(run_dir),
            pid_start=start_time(proc.pid),
        ).save(run_dir)
        yield run_dir
    finally:
        stop(proc)


def kvmlab(
    *args: str, stdin: int | IO[Any] | None = subprocess.DEVNULL, timeout: float = 60
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([KVMLAB, *args], stdin=stdin, capture_output=True, timeout=timeout)


def sleeps(marker: str) -> list[int]:
    """Live ``sleep`` processes whose argument starts with ``marker`` (not kvmlab's own)."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
            state = (proc / "stat").read_text().rpartition(")")[2].split()[0]
        except (OSError, IndexError):
            continue
        if argv[0] == b"sleep" and argv[1].startswith(marker.encode()) and state != "Z":
            found.append(int(proc.name))
    return found


def wait_sleeping(marker: str, count: int = 1) -> None:
    """Wait until ``count`` sleeps of ``marker`` run: the guest command has started."""
    deadline = time.monotonic() + 20
    while len(sleeps(marker)) < count:
        assert time.monotonic() < deadline, "the guest command did not start"
        time.sleep(0.05)


def gone(marker: str, within: float = 5.0) -> bool:
    """Whether no ``sleep`` of ``marker`` runs (waiting up to ``within`` s)."""
    deadline = time.monotonic() + within
    while sleeps(marker):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


# -- stdin ---------------------------------------------------------------------------------


def test_stdin_from_a_pipe_or_a_file_is_forwarded(guest: Path, tmp_path: Path) -> None:
    piped = subprocess.run(
        [KVMLAB, "exec", ADDRESS, "--", "cat"], input=b"data\n", capture_output=True, timeout=60
    )
    assert (piped.returncode, piped.stdout, piped.stderr) == (0, b"data\n", b"")
    content = bytes(range(256)) * 1000
    (tmp_path / "in.bin").write_bytes(content)
    with (tmp_path / "in.bin").open("rb") as f:
        filed = kvmlab("exec", ADDRESS, "--", "sh", "-c", "cat; exit 4", stdin=f)
    assert (filed.returncode, filed.stdout) == (4, content)


def test_stdin_from_dev_null_or_a_terminal_gives_the_command_dev_null(guest: Path) -> None:
    argv = ["exec", ADDRESS, "--", "sh", "-c", "readlink /proc/self/fd/0; cat"]
    null = kvmlab(*argv)
    assert (null.returncode, null.stdout) == (0, b"/dev/null\n")
    main, terminal = pty.openpty()  # a terminal that never ends: it must not be read
    try:
        tty = kvmlab(*argv, stdin=terminal, timeout=30)
    finally:
        os.close(main)
        os.close(terminal)
    assert (tty.returncode, tty.stdout) == (0, b"/dev/null\n")


def test_input_at_the_limit_passes_and_over_it_is_refused_before_running(
    guest: Path, tmp_path: Path
) -> None:
    big = tmp_path / "big"
    with big.open("wb") as f:
        f.truncate(MAX_INPUT)
    with big.open("rb") as f:
        counted = kvmlab("exec", ADDRESS, "--", "wc", "-c", stdin=f, timeout=120)
    assert (counted.returncode, counted.stdout) == (0, f"{MAX_INPUT}\n".encode())
    mark = tmp_path / "ran"
    with Path("/dev/zero").open("rb") as zero:
        refused = kvmlab("exec", ADDRESS, "--", "sh", "-c", f"touch {mark}; cat", stdin=zero)
    assert refused.returncode == 2
    assert refused.stderr.decode().startswith("kvmlab: input for the guest command is over 47 MiB")
    assert refused.stderr.count(b"\n") == 1 and refused.stdout == b""
    assert not mark.exists()


# -- output --------------------------------------------------------------------------------


def test_output_past_16_mib_is_printed_then_an_error(guest: Path) -> None:
    cut = kvmlab("exec", ADDRESS, "--", "head", "-c", "20000000", "/dev/zero")
    assert cut.returncode == 3
    assert len(cut.stdout) == MAX_OUTPUT
    lines = cut.stderr.decode().splitlines()
    assert lines[0].startswith(
        "kvmlab: guest command ['head', '-c', '20000000', '/dev/zero'] "
        "wrote more than 16 MiB to stdout"
    )
    assert lines[0].endswith("the command exited with 0")
    assert lines[1].startswith("kvmlab:   fix: write it to a file in the guest")
    err = kvmlab("exec", ADDRESS, "--", "sh", "-c", "head -c 17000000 /dev/zero >&2; exit 5")
    assert err.returncode == 3 and len(err.stderr) > MAX_OUTPUT
    assert b"to stderr; " in err.stderr and b"exited with 5" in err.stderr
    exact = kvmlab("exec", ADDRESS, "--", "head", "-c", str(MAX_OUTPUT), "/dev/zero")
    assert (exact.returncode, len(exact.stdout), exact.stderr) == (0, MAX_OUTPUT, b"")


def test_a_reader_that_leaves_is_not_a_traceback(guest: Path) -> None:
    proc = subprocess.run(
        f"{KVMLAB} exec {ADDRESS} -- seq 100000 | head -1",
        shell=True,
        capture_output=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, b"1\n", b"")


# -- interrupts and timeouts ---------------------------------------------------------------


@pytest.mark.parametrize(
    "sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP], ids=["ctrl-c", "sigterm", "sighup"]
)
def test_an_interrupt_kills_the_guest_command_and_its_children(
    guest: Path, sig: signal.Signals
) -> None:
    marker = f"6{sig.value}.{os.getpid()}"
    script = f"sleep {marker}1 & sleep {marker}2; true"
    proc = subprocess.Popen(
        [KVMLAB, "exec", ADDRESS, "--", "sh", "-c", script],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    wait_sleeping(marker, 2)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert err.decode().startswith("kvmlab: interrupted: guest command ['sh', '-c', ")
    assert err.decode().endswith(" was killed\n") and err.count(b"\n") == 1
    assert gone(marker), "the guest command or a child survived"


def test_more_ctrl_c_during_the_kill_leave_no_traceback(guest: Path) -> None:
    marker = f"71.{os.getpid()}"
    proc = subprocess.Popen(
        [KVMLAB, "exec", ADDRESS, "--", "sleep", marker],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    wait_sleeping(marker)
    for _ in range(5):
        proc.send_signal(signal.SIGINT)
        time.sleep(0.01)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert b"Traceback" not in err and err.count(b"\n") == 1, err
    assert err.endswith(b" was killed\n"), err
    assert gone(marker)


def test_bad_timeouts_are_refused_before_anything_runs(guest: Path, tmp_path: Path) -> None:
    mark = tmp_path / "ran"
    for value in ("nan", "0", "-1"):
        proc = kvmlab("exec", ADDRESS, "--timeout", value, "--", "touch", str(mark))
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.decode() == (
            f"kvmlab: --timeout must be a positive number of seconds, not {float(value):g}\n"
        )
    assert not mark.exists()


def test_timeout_kills_the_command_and_its_children(guest: Path) -> None:
    marker = f"72.{os.getpid()}"
    proc = kvmlab(
        "exec",
        ADDRESS,
        "--timeout",
        "1",
        "--",
        "sh",
        "-c",
        f"sleep {marker}1 & sleep {marker}2; true",
    )
    assert proc.returncode == 3
    assert b"still running after 1s" in proc.stderr
    assert gone(marker)


# -- console -------------------------------------------------------------------------------


class Console:
    """QEMU's console chardev: greets, echoes each chunk it gets as ``got:...``."""

    def __init__(self, path: Path) -> None:
        self.received = b""
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(str(path))
        self._listener.listen(1)
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        conn, _ = self._listener.accept()
        with conn:
            conn.sendall(b"login: ")
            while data := conn.recv(4096):
                self.received += data
                conn.sendall(b"got:" + data)

    def close(self) -> None:
        self._listener.close()


SAID = CONNECTED.encode() + b"\n"  # stderr's only line: attached (stdin is not a terminal)


@pytest.fixture
def console(guest: Path) -> Iterator[Console]:
    server = Console(guest / CONSOLE_SOCKET)
    yield server
    server.close()


def test_console_with_stdin_from_dev_null(console: Console) -> None:
    proc = kvmlab("console", ADDRESS, timeout=30)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, b"login: ", SAID)


@pytest.mark.parametrize("source", ["file", "pipe"])
def test_console_with_stdin_from_a_file_or_a_pipe(
    console: Console, tmp_path: Path, source: str
) -> None:
    if source == "pipe":
        proc = subprocess.run(
            [KVMLAB, "console", ADDRESS], input=b"root\n", capture_output=True, timeout=30
        )
    else:
        (tmp_path / "keys").write_bytes(b"root\n")
        with (tmp_path / "keys").open("rb") as f:
            proc = kvmlab("console", ADDRESS, stdin=f, timeout=30)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, b"login: got:root\n", SAID)
    assert console.received == b"root\n"
