"""Issue 28's second hostile pass over the day's new code, each finding kept: a tune apply
cut short by Ctrl-C or SIGTERM leaves nothing changed; an apply whose write-back fails
says so instead of "nothing changed"; neither the tuning state file nor an exits import
ever opens a device node (opening one can act: a watchdog arms); when_tcg may not give
the guest host files, host disks made writable or host attachments it lacks as written."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kvmlab.errors import UsageError
from kvmlab.exits.perfkvm import import_file
from kvmlab.net import tune
from kvmlab.net.tune import State, TuningStateError, apply, cpu_partitioning
from tests.net.test_tune import FILES, host, managed_irq
from tests.spec.test_hostile_lab_messages import FWD, HEAD, refused

__all__ = ["host"]  # the stand-in host root fixture

SEES = "when_tcg may not widen what a guest sees of the host"


def untouched(root: Path) -> None:
    for rel, text in FILES.items():
        now = (root / rel).read_text().strip()
        assert now == (text.split("[")[1].split("]")[0] if "[" in text else text), rel


def test_an_apply_interrupted_part_way_writes_back_what_it_changed(
    host: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = Path.write_text

    def write_text(self: Path, data: str, *args: object, **kw: object) -> int:
        if "irq/31" in str(self):  # Ctrl-C (or SIGTERM, the CLI's KeyboardInterrupt) here
            raise KeyboardInterrupt
        return real(self, data, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(Path, "write_text", write_text)
    state = State(tmp_path / "state.json")
    with pytest.raises(KeyboardInterrupt):
        apply(cpu_partitioning([3], host), state, root=host)
    monkeypatch.undo()
    assert not state.path.exists()
    untouched(host)


def test_an_apply_whose_write_back_fails_does_not_say_nothing_changed(
    host: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    managed_irq(host, "24", "3")  # fails the apply: everything goes back, but ...
    real = tune._write_back

    def write_back(path: Path, value: str) -> None:
        if path.name == "stat_interval":  # ... this one cannot
            raise OSError(1, "Operation not permitted")
        real(path, value)

    monkeypatch.setattr(tune, "_write_back", write_back)
    state = State(tmp_path / "state.json")
    out = apply(cpu_partitioning([3], host), state, root=host)
    assert not out.undone and state.path.exists()
    assert [d[0] for d in out.done] == ["vmstat interval"]
    assert (
        "vmstat interval",
        "could not be written back (Operation not permitted); "
        f"{state.path} keeps it for 'kvmlab tune rollback'",
    ) in out.failed


def test_a_tuning_state_at_a_device_is_refused_without_opening_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    opened: list[str] = []
    real = os.open
    monkeypatch.setattr(os, "open", lambda p, *a, **k: opened.append(str(p)) or real(p, *a, **k))
    with pytest.raises(TuningStateError, match="is not a regular file"):
        State(Path("/dev/null")).read()
    assert "/dev/null" not in opened


def test_an_exits_import_of_a_device_is_refused_without_opening_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    opened: list[str] = []
    real = os.open
    monkeypatch.setattr(os, "open", lambda p, *a, **k: opened.append(str(p)) or real(p, *a, **k))
    with pytest.raises(UsageError, match="a character device"):
        import_file(Path("/dev/zero"), "x", 1.0)
    assert "/dev/zero" not in opened


@pytest.mark.parametrize(
    ("text", "key", "message"),
    [
        (
            'when_tcg = { disks = [{ path = "/dev/sda", format = "raw" }] }\n',
            "disks[0].path",
            f"'/dev/sda' gives the guest a host file the guest as written does not have; {SEES}: "
            "add the disk on the guest itself",
        ),
        (
            'disks = [{ path = "/d.qcow2", readonly = true }]\n'
            'when_tcg = { disks = [{ path = "/d.qcow2" }] }\n',
            "disks[0].readonly",
            f"makes '/d.qcow2' writable, which the guest as written reads only; {SEES}: keep "
            "readonly = true",
        ),
        (
            'boot = "kernel"\nkernel = "/boot/vmlinuz"\nwhen_tcg = { initrd = "/etc/shadow" }\n',
            "initrd",
            "changes the host file the guest as written uses ('/etc/shadow'); "
            f"{SEES}: set initrd on the guest itself",
        ),
        (
            'when_tcg = { qemu = "/tmp/evil" }\n',
            "qemu",
            f"changes the host file the guest as written uses ('/tmp/evil'); {SEES}: set qemu "
            "on the guest itself",
        ),
        (
            'when_tcg = { nics = [{ type = "tap", ifname = "eth0" }] }\n',
            "nics[0]",
            f"attaches the guest to the host (tap NIC) where the guest as written is not; {SEES}: "
            "add the NIC on the guest itself",
        ),
        (
            'when_tcg = { nics = [{ type = "vhost-user", socket = "/run/x.sock" }] }\n',
            "nics[0]",
            "attaches the guest to the host (vhost-user NIC) where the guest as written is not; "
            f"{SEES}: add the NIC on the guest itself",
        ),
    ],
)
def test_when_tcg_may_not_give_the_guest_more_of_the_host(
    tmp_path: Path, text: str, key: str, message: str
) -> None:
    lab, line = refused(tmp_path, HEAD + text)
    assert line == f"kvmlab: {lab}: guests.vm.when_tcg.{key}: {message}"


def test_when_tcg_may_retune_what_the_guest_already_has(tmp_path: Path) -> None:
    from kvmlab.spec import load_lab

    lab = tmp_path / "lab.toml"
    tap = '{ type = "tap", ifname = "t0" }'
    lab.write_text(
        HEAD + f'disks = [{{ path = "/d.qcow2" }}]\nnics = [{tap}]\nwhen_tcg = {{ vcpus = 1, '
        'disks = [{ path = "/d.qcow2", cache = "writeback" }], nics = [{ type = "tap", '
        'ifname = "t0", queues = 2 }] }\n'
    )
    assert load_lab(lab).lab.guests["vm"].under("tcg").nics[0].queues == 2


@pytest.mark.parametrize("addr", ["localhost", "0.0.0.0/0", "127.1x"])
def test_a_host_addr_that_is_not_an_address_is_said_in_kvmlabs_words(
    tmp_path: Path, addr: str
) -> None:
    nic = FWD.format(addr=f', host_addr = "{addr}"')
    _, line = refused(tmp_path, f"{HEAD}nics = [{nic}]\n")
    assert line.endswith(f"host_addr: {addr!r} is not an IPv4 address (like 127.0.0.1)"), line


def test_tune_options_are_checked_and_never_echoed_whole() -> None:
    from tests.conftest import cli

    env = {**os.environ, "KVMLAB_TUNING_STATE": "/nonexistent/kvmlab-test/state.json"}
    yaml = cli(env, "tune", "verify", "--isolate", "0", "-o", "yaml")
    assert yaml.returncode == 2 and "choose text or json (got 'yaml')" in yaml.stderr
    long = cli(env, "tune", "apply", "--isolate", "0", "--unmovable-irqs", "a" * 5000)
    assert long.returncode == 2 and "(5000 characters)" in long.stderr
    assert len(long.stderr) < 300, long.stderr


def test_a_rollback_of_unmovable_irqs_only_says_so(tmp_path: Path) -> None:
    from tests.conftest import cli

    private = tmp_path / "state"
    private.mkdir(mode=0o700)
    state = private / "st.json"
    state.write_text(
        '{"owner": null, "root": "/", "changes": [], '
        '"unmovable": ["proc/irq/9999999/smp_affinity_list"]}'
    )
    state.chmod(0o600)
    env = {**os.environ, "KVMLAB_TUNING_STATE": str(state)}
    back = cli(env, "tune", "rollback")
    assert (
        back.returncode == 0 and "nothing to roll back: the tuning changed no value" in back.stdout
    )
    assert not state.exists()


def test_an_empty_import_path_is_refused_in_one_line() -> None:
    from tests.conftest import cli

    got = cli(dict(os.environ), "exits", "--import", "")
    assert got.returncode == 2 and "--import: give the file of a" in got.stderr
