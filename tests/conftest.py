"""Shared test helpers: the shipped labs and targets to render them for."""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from kvmlab.render import Accel, BootImage, Target
from kvmlab.spec import LoadedLab, load_lab

ROOT = Path(__file__).resolve().parent.parent
LABS = ROOT / "labs"
LAB_FILES = sorted(LABS.glob("*.toml"))
KVMLAB = str(Path(sys.executable).with_name("kvmlab"))
# Tests never see (or roll back) tuning of the host they run on: a state file of their own,
# in a directory this process made and removes when it ends (each xdist worker has its own).
_TUNING_DIR = tempfile.mkdtemp(prefix="kvmlab-tune-")
atexit.register(shutil.rmtree, _TUNING_DIR, ignore_errors=True)
os.environ["KVMLAB_TUNING_STATE"] = str(Path(_TUNING_DIR) / "t.json")


def cli(env: dict[str, str], *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """The kvmlab command with ``env`` (stdin closed: exec forwards stdin, as ssh does)."""
    return subprocess.run(
        [KVMLAB, *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def interrupted_after(env: dict[str, str], seconds: float, *args: str) -> tuple[int, str, str]:
    """Run kvmlab, send Ctrl-C (SIGINT) after ``seconds`` (it must still be running then);
    its exit status, stdout and stderr."""
    import signal
    import time

    pipe = subprocess.PIPE
    proc = subprocess.Popen(
        [KVMLAB, *args], env=env, stdout=pipe, stderr=pipe, stdin=subprocess.DEVNULL, text=True
    )
    time.sleep(seconds)
    assert proc.poll() is None, proc.communicate()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=300)
    return proc.returncode, out, err


def interrupted_once(
    env: dict[str, str],
    marker: str,
    times: int,
    *args: str,
    timeout: float = 600,
    on_stderr: bool = False,
) -> tuple[int, str, str]:
    """Run kvmlab, send Ctrl-C (SIGINT) as soon as ``marker`` has appeared ``times`` times
    on its stdout (its stderr with ``on_stderr``: the progress lines; it must still be
    running then); its exit status, stdout and stderr. Waits on progress, not a fixed
    time: ``timeout`` only bounds a run that never prints it."""
    import signal
    import threading

    pipe = subprocess.PIPE
    proc = subprocess.Popen(
        [KVMLAB, *args], env=env, stdout=pipe, stderr=pipe, stdin=subprocess.DEVNULL, text=True
    )
    watched, other = (proc.stderr, proc.stdout) if on_stderr else (proc.stdout, proc.stderr)
    assert watched is not None and other is not None
    rest: list[str] = []
    reader = threading.Thread(target=lambda: rest.append(other.read()))
    reader.start()
    seen_lines: list[str] = []
    seen = 0
    timer = threading.Timer(timeout, proc.kill)
    timer.start()
    try:
        for line in watched:
            seen_lines.append(line)
            seen += marker in line
            if seen >= times:
                assert proc.poll() is None, "kvmlab ended before it was interrupted"
                proc.send_signal(signal.SIGINT)
                break
        seen_lines.append(watched.read())
        proc.wait(timeout=300)
    finally:
        timer.cancel()
        reader.join(timeout=300)
    text = "".join(seen_lines)
    assert seen >= times, f"{marker!r} appeared {seen} times: {text[-2000:]}"
    if on_stderr:
        return proc.returncode, "".join(rest), text
    return proc.returncode, text, "".join(rest)


def wait_connected(console: subprocess.Popen[bytes]) -> None:
    """Wait until ``kvmlab console`` (stderr piped) says it is attached: what the guest
    writes from then on reaches it."""
    assert console.stderr is not None
    said = b""
    while b"connected to the serial console" not in said:
        line = console.stderr.readline()
        assert line, f"kvmlab console ended before it attached: {said.decode(errors='replace')}"
        said += line


@contextmanager
def lab_up(
    tmp: Path, lab_file: str, lab: str, *up_args: str, force_down: bool = False
) -> Iterator[dict[str, str]]:
    """A lab up in a private run root for the ``with`` block (its environment); afterwards
    it is down (``force_down``: killed, for a fixture whose graceful nested stop is tested
    elsewhere) and none of its QEMUs is left."""
    from tests.runtime.conftest import qemu_pids

    env = {**os.environ, "KVMLAB_RUN_DIR": str(tmp / "run")}
    up = cli(env, "up", str(LABS / lab_file), *up_args, timeout=1200)
    try:
        assert up.returncode == 0, up.stderr[-3000:]
        yield env
    finally:
        cli(env, "down", lab, *(["--force"] if force_down else []), timeout=600)
        assert not qemu_pids(str(tmp / "run"))


def lab_ids() -> list[str]:
    """Test ids: the lab file stems."""
    return [p.stem for p in LAB_FILES]


FAKE_IMAGE = BootImage(
    kernel=Path("/cache/images/KEY/kernel"),
    initrd=Path("/cache/images/KEY/initrd.img"),
    append="console=ttyS0 quiet panic=-1 kvmlab.share=9p kvmlab.tag=hostfs",
    share="9p",
    share_tag="hostfs",
)
FAKE_STANDALONE = BootImage(
    kernel=Path("/cache/images/KEY2/kernel"),
    initrd=Path("/cache/images/KEY2/initrd.img"),
    append="console=ttyS0 quiet panic=-1 kvmlab.share=none kvmlab.tag=hostfs",
    share="none",
    share_tag="hostfs",
)


def target_for(
    loaded: LoadedLab,
    path: tuple[str, ...],
    accel: Accel = "tcg",
    run_dir: Path | None = None,
    lab_dir: Path | None = None,
    image: BootImage = FAKE_IMAGE,
) -> Target:
    """A deterministic target: fixed run dir, reason and (fake) default image unless given
    (the self-contained one for a migratable guest, as the runtime picks it)."""
    guest = loaded.lab.find("/".join(path))
    if image is FAKE_IMAGE and guest is not None and guest.migratable:
        image = FAKE_STANDALONE
    switch = loaded.lab.switch if len(path) == 1 else None
    return Target(
        switch_dir=None if switch is None else Path("/run/kvmlab", loaded.lab.name, ".switch"),
        switch_kind=None if switch is None else switch.kind,
        image=image,
        lab=loaded.lab.name,
        address=path,
        lab_dir=lab_dir or Path("/labs"),
        run_dir=run_dir or Path("/run/kvmlab").joinpath(loaded.lab.name, *path),
        auto_accel=accel,
        auto_reason="test host" if accel == "tcg" else "test host with usable KVM",
    )


@pytest.fixture(params=LAB_FILES, ids=lab_ids())
def shipped_lab(request: pytest.FixtureRequest) -> LoadedLab:
    """Each lab in labs/, loaded."""
    path: Path = request.param
    return load_lab(path)


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """A private directory with a short path (``/tmp/kt-XXXXXXXX``), removed afterwards.

    For a test whose program names its own run directory below ``TMPDIR``: pytest's
    ``tmp_path`` grows with the run's number and the test's name, and a unix socket path
    takes at most 107 bytes (CI once ran as pytest-102 and the console socket came to 108).
    """
    path = Path(tempfile.mkdtemp(prefix="kt-", dir="/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


SIDE_LANE = (
    "tests/bench/test_kbuild.py",
    "tests/benchrun/test_paging_matrix.py",
    "tests/exits/test_exits_functional.py",
    "tests/exits/test_rtc_storm.py",
    "tests/guest/test_agent.py",
    "tests/guest/test_boot.py",
    "tests/guest/test_disk_boot.py",
    "tests/guest/test_exec_channel.py",
    "tests/guest/test_init_refusals.py",
    "tests/libvirt_backend/test_cloud_init_libvirt.py",
    "tests/libvirt_backend/test_nested_bench_libvirt.py",
    "tests/render/test_libvirt_schema.py",
    "tests/render/test_qemu_accepts.py",
    "tests/report/test_html.py",
    "tests/runtime/test_crash_safety.py",
    "tests/runtime/test_exec_cli.py",
    "tests/runtime/test_hostview_guest.py",
    "tests/runtime/test_lifecycle.py",
    "tests/test_benchmarks_smoke.py",
)
"""Functional tests `make test` runs in a second lane, beside the others: one guest (or
one guest hypervisor and its guest) at a time on user networking or none (no port forward,
tap, bridge, namespace, huge page, switch or tracefs of the host: the RTC storm's tracing
and the timer storm's are inside their L1, and ``perf`` samples one QEMU's threads; the
paging matrix's exit profile is inside its L1 too), nothing measured against time or against
host-wide state (the RTC storm compares exit counts of one window against another's, 100x
apart; the timer storm's verdicts are counts and shares; the paging matrix's, that its
figures exist, its L1 runs shadow paging as read back there, and its table's rows; the
libvirt nested bench's, that each level has its rows), each libvirt test with a private
libvirtd of its own, the images they boot built before either lane starts. A booting test
keeps this 2-core host about half busy, so the other lane's guests lose little; the tests
that compare the host's links, namespaces or huge pages before and after, measure, or
migrate under load stay in the main lane."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark the side lane's functional tests ``side`` (``-m "functional and side"``)."""
    for item in items:
        if item.get_closest_marker("functional") is None:
            continue
        where = Path(str(item.fspath)).relative_to(ROOT).as_posix()
        if where in SIDE_LANE:
            item.add_marker(pytest.mark.side)
