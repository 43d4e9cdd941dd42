"""``kvmlab libvirtd`` signals only processes it can prove are its daemon's, and its start
runs no shell: real private daemons, with the faults made from outside kvmlab (a daemon
killed by ``kill -9``, its record rewritten by hand, programs named like QEMU in other
mount namespaces, a TCP port another daemon holds, run directories a shell would split).

A daemon's process is proven by its mounts: its ``/etc/libvirt`` is the daemon's own
directory. A recorded pid, a command line or a mount-namespace number (Linux reuses them)
proves nothing."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import cli

pytestmark = pytest.mark.functional


@pytest.fixture(autouse=True)
def _needs_libvirtd() -> None:
    if shutil.which("libvirtd") is None:
        pytest.skip("libvirtd is not installed (make deps installs it)")


@pytest.fixture
def spawned() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Processes a test starts itself (the victims); killed afterwards."""
    procs: list[subprocess.Popen[bytes]] = []
    yield procs
    for proc in procs:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def env_for(run: Path) -> dict[str, str]:
    return {**os.environ, "KVMLAB_RUN_DIR": str(run)}


def record(run: Path, name: str) -> dict[str, object]:
    data = json.loads((run / ".libvirtd" / name / "daemon.json").read_text())
    assert isinstance(data, dict)
    return data


def rewrite(run: Path, name: str, **fields: object) -> None:
    path = run / ".libvirtd" / name / "daemon.json"
    path.write_text(json.dumps({**record(run, name), **fields}))


def named_like_qemu(
    spawned: list[subprocess.Popen[bytes]], *enter: str, title: str = "qemu-system-x86_64"
) -> int:
    """A sleeping program whose command line starts with ``title``, started by this test
    (``enter``: the argv that puts it in a mount namespace); its pid."""
    argv = [*enter, "bash", "-c", f'exec -a "{title}" sleep 300']
    proc = subprocess.Popen(argv, start_new_session=True, stdin=subprocess.DEVNULL)
    spawned.append(proc)
    for _ in range(100):
        if Path(f"/proc/{proc.pid}/cmdline").read_bytes().startswith(title.encode()):
            return proc.pid
        time.sleep(0.05)
    raise AssertionError(f"{title} did not start")


def running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def killed(pid: int) -> None:
    os.kill(pid, signal.SIGKILL)
    for _ in range(100):
        if not running(pid):
            return
        time.sleep(0.05)
    raise AssertionError(f"pid {pid} did not die")


def test_a_dead_daemon_s_record_never_turns_a_stop_on_other_programs(
    short_tmp: Path, spawned: list[subprocess.Popen[bytes]]
) -> None:
    """The daemon dies (kill -9); its record is then rewritten to name a program in a
    mount namespace of its own, named like QEMU (the namespace number may even be the
    daemon's old one, which Linux reuses), without a start time, and a program in the
    host's namespace is named like QEMU too. Stop signals neither, says the record's pid
    was not signalled, and still stops the QEMU-named program the daemon left in its own
    namespace (proven by its mounts)."""
    run = short_tmp / "run"
    env = env_for(run)
    started = cli(env, "libvirtd", "start", "h2", timeout=120)
    assert started.returncode == 0, started.stderr
    daemon = int(str(record(run, "h2")["pid"]))
    # as the daemon's own QEMUs are: its mounts and its root (entering a mount namespace
    # alone moves a process to the namespace's root, out of a chroot the daemon runs in)
    left = named_like_qemu(
        spawned,
        "nsenter",
        f"--mount=/proc/{daemon}/ns/mnt",
        f"--root=/proc/{daemon}/root",
        "--wd=/",
        "--",
    )
    killed(daemon)
    victim = named_like_qemu(
        spawned, "unshare", "--mount", "--propagation", "unchanged", "--", title="qemu-system-x"
    )
    on_host = named_like_qemu(spawned, title="qemu-system-x86_64-host")
    victim_ns = str(Path(f"/proc/{victim}/ns/mnt").readlink())
    rewrite(run, "h2", pid=victim, pid_start=None, mnt_ns=victim_ns)
    listed = cli(env, "libvirtd", "list", "-o", "json")
    assert json.loads(listed.stdout)["daemons"][0]["state"] == "dead", listed.stdout
    stopped = cli(env, "libvirtd", "stop", "h2", timeout=120)
    assert stopped.returncode == 0, stopped.stderr
    assert f"its record's pid {victim} is gone or another program's: not signalled" in (
        stopped.stderr
    )
    assert "stopped 1 QEMU process(es) it left" in stopped.stderr
    assert running(victim) and running(on_host)
    assert not running(left)
    assert not (run / ".libvirtd" / "h2").exists()


def test_a_record_naming_another_private_daemon_leaves_that_daemon_running(
    short_tmp: Path,
) -> None:
    """Daemon a's record names daemon b's pid (no start time): stopping a leaves b serving
    (``virsh`` still reaches it); a is told apart from b by its mounts."""
    run = short_tmp / "run"
    env = env_for(run)
    uris = {}
    for name in ("a", "b"):
        started = cli(env, "libvirtd", "start", name, timeout=120)
        assert started.returncode == 0, started.stderr
        uris[name] = started.stdout.split()[0]
    try:
        killed(int(str(record(run, "a")["pid"])))
        rewrite(run, "a", pid=record(run, "b")["pid"], pid_start=None)
        stopped = cli(env, "libvirtd", "stop", "a", timeout=120)
        assert stopped.returncode == 0, stopped.stderr
        assert "not signalled" in stopped.stderr
        version = subprocess.run(
            ["virsh", "-c", uris["b"], "version"], capture_output=True, text=True, timeout=60
        )
        assert version.returncode == 0, version.stderr
    finally:
        cli(env, "libvirtd", "stop", "b", timeout=120)


@pytest.mark.parametrize(
    "where",
    ["r;touch${IFS}PWNED;x", "my labs", "q\"uo'te", "100%25 $(touch PWNED)"],
    ids=["semicolon", "space", "quotes", "percent-and-substitution"],
)
def test_a_run_directory_a_shell_would_split_is_only_a_name(where: str, short_tmp: Path) -> None:
    """No shell sees the run directory: the daemon starts, the URI it prints (its socket
    path percent-encoded) works in ``virsh``, and nothing the name spells is run."""
    base = short_tmp / "t"
    base.mkdir()
    run = base / where / "run"
    env = {**env_for(run), "PWD": str(base)}
    started = subprocess.run(
        [*_kvmlab(), "libvirtd", "start", "h3"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=base,
    )
    try:
        assert started.returncode == 0, started.stderr
        uri = started.stdout.split()[0]
        version = subprocess.run(
            ["virsh", "-c", uri, "list", "--all"], capture_output=True, text=True, timeout=60
        )
        assert version.returncode == 0, version.stderr
    finally:
        stopped = cli(env, "libvirtd", "stop", "h3", timeout=120)
    assert stopped.returncode == 0, stopped.stderr
    assert not list(short_tmp.rglob("PWNED")), "the run directory's name was run"


def _kvmlab() -> list[str]:
    from tests.conftest import KVMLAB

    return [KVMLAB]


def test_a_tcp_port_another_daemon_holds_is_refused(short_tmp: Path) -> None:
    """The port is held by a listener this test opens; the daemon never prints that
    listener's URI as its own, and leaves no state behind."""
    run = short_tmp / "run"
    env = env_for(run)
    with socket.socket() as holder:
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        started = cli(env, "libvirtd", "start", "h7", "--tcp-port", str(port), timeout=120)
    assert started.returncode == 4, started.stdout + started.stderr
    assert started.stdout == ""
    assert f"TCP port {port} is taken on this host (pid {os.getpid()}" in started.stderr
    assert not (run / ".libvirtd" / "h7").exists()


def test_a_daemon_whose_kvm_node_is_its_own_starts_without_a_shell(
    short_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where /dev/kvm is closed to libvirt's QEMU user the daemon gets a node of its own
    (forced here: this host's node may be open to it): made by argv steps, in a run
    directory with a space, seen only in the daemon's namespace."""
    if not Path("/dev/kvm").exists():
        pytest.skip("no /dev/kvm on this host")
    from kvmlab.runtime.libvirt import private

    monkeypatch.setenv("KVMLAB_RUN_DIR", str(short_tmp / "a b" / "run"))
    monkeypatch.setattr(private, "kvm_blocked", lambda: "closed (forced by the test)")
    before = Path("/dev/kvm").stat()
    daemon = private.start("kvm")
    try:
        inside = Path(f"/proc/{daemon.pid}/root/dev/kvm").stat()
        assert inside.st_rdev == before.st_rdev and inside.st_ino != before.st_ino
        assert (inside.st_mode & 0o777) == 0o660
    finally:
        private.stop("kvm")
    after = Path("/dev/kvm").stat()
    assert (after.st_ino, after.st_mode, after.st_gid) == (
        before.st_ino,
        before.st_mode,
        before.st_gid,
    )


def test_a_daemon_whose_socket_was_deleted_stops_without_libvirt_s_own_lines(
    short_tmp: Path,
) -> None:
    run = short_tmp / "run"
    env = env_for(run)
    started = cli(env, "libvirtd", "start", "h4", timeout=120)
    assert started.returncode == 0, started.stderr
    pid = int(str(record(run, "h4")["pid"]))
    (run / ".libvirtd" / "h4" / "run" / "libvirt-sock").unlink()
    stopped = cli(env, "libvirtd", "stop", "h4", timeout=120)
    assert stopped.returncode == 0, stopped.stderr
    assert stopped.stderr == "" and stopped.stdout == ""
    assert not running(pid)


def test_a_socket_swapped_for_another_daemon_s_leaves_that_daemon_s_domains(
    short_tmp: Path,
) -> None:
    """Daemon hq's socket is replaced by a link to daemon h6's: stopping hq asks h6
    nothing (the daemon answering must carry hq's own host UUID), so h6's domain stays
    defined; a daemon name that is a link to another daemon's directory is refused
    before anything is signalled."""
    run = short_tmp / "run"
    env = env_for(run)
    uris = {}
    for name in ("h6", "hq"):
        started = cli(env, "libvirtd", "start", name, timeout=120)
        assert started.returncode == 0, started.stderr
        uris[name] = started.stdout.split()[0]
    try:
        domain = short_tmp / "victim.xml"
        domain.write_text(
            "<domain type='qemu'><name>victimdom</name><memory unit='MiB'>64</memory>"
            "<os><type arch='x86_64' machine='q35'>hvm</type></os></domain>"
        )
        defined = subprocess.run(
            ["virsh", "-c", uris["h6"], "define", str(domain)], capture_output=True, timeout=60
        )
        assert defined.returncode == 0, defined.stderr
        socket_path = run / ".libvirtd" / "hq" / "run" / "libvirt-sock"
        socket_path.unlink()
        socket_path.symlink_to(run / ".libvirtd" / "h6" / "run" / "libvirt-sock")
        assert cli(env, "libvirtd", "stop", "hq", timeout=120).returncode == 0
        (run / ".libvirtd" / "hz").symlink_to(run / ".libvirtd" / "h6")
        refused = cli(env, "libvirtd", "stop", "hz", timeout=120)
        assert refused.returncode == 2 and "is a symbolic link" in refused.stderr
        names = subprocess.run(
            ["virsh", "-c", uris["h6"], "list", "--all", "--name"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert names.returncode == 0 and "victimdom" in names.stdout.split(), names.stderr
    finally:
        (run / ".libvirtd" / "hz").unlink(missing_ok=True)
        cli(env, "libvirtd", "stop", "h6", timeout=120)


def test_a_module_in_the_current_directory_is_never_run_as_root(short_tmp: Path) -> None:
    """kvmlab's daemon set-up step is a Python of its own: a json.py where kvmlab was run
    from must not be imported by it."""
    here = short_tmp / "here"
    here.mkdir()
    planted = short_tmp / "PWNED"
    (here / "json.py").write_text(f"open({str(planted)!r}, 'w').write('x')\nraise SystemExit\n")
    env = env_for(short_tmp / "run")
    started = subprocess.run(
        [*_kvmlab(), "libvirtd", "start", "he"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=here,
    )
    try:
        assert started.returncode == 0, started.stderr
        assert not planted.exists()
    finally:
        cli(env, "libvirtd", "stop", "he", timeout=120)


def test_two_starts_of_one_name_at_once_give_one_daemon(short_tmp: Path) -> None:
    env = env_for(short_tmp / "run")
    argv = [*_kvmlab(), "libvirtd", "start", "hy"]
    procs = [
        subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    results = [(p.wait(120), *p.communicate()) for p in procs]
    try:
        codes = sorted(code for code, _, _ in results)
        assert codes == [0, 2], results
        refused = next(err for code, _, err in results if code == 2)
        assert "runs already" in refused and "Traceback" not in refused
    finally:
        stopped = cli(env, "libvirtd", "stop", "hy", timeout=120)
    assert stopped.returncode == 0, stopped.stderr
