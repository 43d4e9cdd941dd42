"""Every VM on the host and who runs it, proven: a QEMU nobody registered is ``other``, a
system libvirt domain is the pid in its pid file only when that process calls itself by
the domain's name, and the refusals of ``pid:N`` / ``domain:NAME`` are one line each."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kvmlab.errors import UsageError
from kvmlab.exits.collect import NoExits
from kvmlab.exits.foreign import profile_foreign, resolve
from kvmlab.runtime.host_vms import host_vms
from kvmlab.runtime.libvirt.managed import _system, system_domain_pid


def _start_named(name: str) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        [
            "bash",
            "-c",
            "exec -a qemu-system-x86_64 /usr/bin/python3 -c 'import time; time.sleep(60)' "
            f"-name guest={name},debug-threads=on -accel tcg",
        ]
    )
    deadline = time.monotonic() + 30
    while not Path(f"/proc/{proc.pid}/cmdline").read_bytes().startswith(b"qemu-system"):
        assert time.monotonic() < deadline
        time.sleep(0.01)
    return proc


@pytest.fixture
def outsider() -> Iterator[int]:
    proc = _start_named("outsider")
    yield proc.pid
    proc.kill()
    proc.wait()


def test_a_qemu_nobody_manages_is_other_and_named_by_pid(outsider: int) -> None:
    vms = {vm.qemu.pid: vm for vm in host_vms(sample_s=0.2)}
    vm = vms[outsider]
    assert vm.origin == "other" and vm.address == "outsider" and vm.manager is None
    assert vm.target == f"pid:{outsider}"
    assert vm.host_cpu_pct is not None and vm.host_cpu_pct < 50  # it sleeps


def test_a_system_domain_is_its_pid_file_and_its_own_name(outsider: int, tmp_path: Path) -> None:
    (tmp_path / "outsider.pid").write_text(f"{outsider}\n")
    assert system_domain_pid("outsider", tmp_path) == outsider
    assert [(v.pid, v.name) for v in _system(tmp_path)] == [(outsider, "outsider")]
    # a pid file naming a QEMU that calls itself otherwise proves nothing
    (tmp_path / "win10.pid").write_text(f"{outsider}\n")
    assert system_domain_pid("win10", tmp_path) is None
    (tmp_path / "bad.pid").write_text("1; rm -rf /\n")
    assert system_domain_pid("bad", tmp_path) is None
    assert system_domain_pid("../outsider", tmp_path) is None


def test_pid_targets_resolve_or_are_refused_in_one_line(outsider: int) -> None:
    target = resolve(f"pid:{outsider}")
    assert target.qemu.pid == outsider and target.label == f"pid:{outsider} (outsider)"
    with pytest.raises(NoExits, match=r"runs under tcg .*TCG has no VM exits"):
        profile_foreign(target, 1.0)
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        for text, words in (
            (f"pid:{sleeper.pid}", "no QEMU runs as pid"),
            ("pid:abc", "a pid is a number"),
            ("pid:0", "a pid is a number"),
            ("domain:nosuch", "no running domain 'nosuch' on qemu:///system"),
        ):
            with pytest.raises(UsageError, match=words) as caught:
                resolve(text)
            assert "\n" not in str(caught.value) and "kvmlab ps --all" in str(caught.value)
    finally:
        sleeper.kill()
        sleeper.wait()


def test_a_qemu_of_another_user_is_refused_to_a_user_without_root(
    outsider: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The outsider runs as root; kvmlab run by another user (its euid changed from
    outside the code) is refused in one line naming the owner and the fix."""
    monkeypatch.setattr("os.geteuid", lambda: 65534)
    with pytest.raises(UsageError, match="is a QEMU of user root, not yours") as caught:
        resolve(f"pid:{outsider}")
    assert "\n" not in str(caught.value) and "needs root" in str(caught.value)
    monkeypatch.undo()
    assert resolve(f"pid:{outsider}").qemu.pid == outsider
