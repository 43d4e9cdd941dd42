"""CPU lists from a lab file or the command line, however large: bounded before any range is
expanded, and CPUs this host lacks named with the host's count (a warning at
``check``, which may run on another host than the lab; a refusal where the lab runs).

The ``check`` runs are subprocesses under a 2 GiB address-space limit, so a regression
fails with a MemoryError instead of taking the host's memory. Nothing here boots a guest:
``up`` runs in-process with the boot replaced by a failure."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from kvmlab.cli.main import main
from kvmlab.host.facts import parse_cpulist
from kvmlab.spec.units import MAX_CPU, parse_cpuset

KVMLAB = str(Path(sys.executable).with_name("kvmlab"))


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))


def kvmlab(*args: str) -> subprocess.CompletedProcess[str]:
    """The installed command under a 2 GiB address-space limit, stdin closed."""
    return subprocess.run(
        [KVMLAB, *args],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        preexec_fn=_limit_memory,
        env={**os.environ, "COLUMNS": "200"},
    )


def lab(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "lab.toml"
    path.write_text('name = "x"\n' + body)
    return path


HUGE = {
    "pinning": (
        '[guests.a]\nvcpus = 2\npinning.vcpus = { 0 = "0-99999999999" }\n',
        "guests.a.pinning.vcpus.0",
    ),
    "emulator": ('[guests.a]\npinning.emulator = "99999999999"\n', "guests.a.pinning.emulator"),
    "numa": (
        '[guests.a]\nvcpus = 1\nmemory = { size = "1G", numa = [{ cpus = '
        '"0-99999999999", memory = "1G" }] }\n',
        "guests.a.memory.numa[0].cpus",
    ),
    "switch": ('[switch]\nkind = "testpmd"\ncores = "1-99999999999"\n[guests.a]\n', "switch.cores"),
    "tuning": ('[tuning]\nisolated = "0-99999999999"\n[guests.a]\n', "tuning.isolated"),
}


@pytest.mark.parametrize("case", sorted(HUGE))
def test_a_huge_cpu_range_is_one_line_not_the_hosts_memory(case: str, tmp_path: Path) -> None:
    body, key = HUGE[case]
    proc = kvmlab("check", str(lab(tmp_path, body)))
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    (line,) = proc.stderr.splitlines()
    assert line.startswith(f"kvmlab: {tmp_path / 'lab.toml'}: {key}: CPU 99999999999 in ")
    assert line.endswith(f"does not exist on any host: CPUs are numbered 0-{MAX_CPU} at most")


@pytest.mark.parametrize(
    "text",
    [
        "0-99999999999",
        "9" * 5000,
        "1" * 200 + "-2",
        "0-" + "9" * 100000,
        "²",
        "٣",
        "0,,1",
        "1-2-3",
        "-1",
        "0x3",
    ],
)
def test_parse_cpuset_refuses_without_expanding(text: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_cpuset(text)
    assert len(str(info.value)) < 200  # the value is quoted shortened, never whole


def test_parse_cpuset_still_takes_the_largest_cpu() -> None:
    assert parse_cpuset(f"{MAX_CPU - 1}-{MAX_CPU}") == (MAX_CPU - 1, MAX_CPU)


def test_host_cpu_lists_from_sysfs_or_a_recorded_tree_are_bounded() -> None:
    assert parse_cpulist("0-1,99999999999") == [0, 1]
    assert len(parse_cpulist("0-99999999999")) == 8192


def test_check_warns_about_cpus_this_host_lacks_with_its_count(tmp_path: Path) -> None:
    body = (
        '[switch]\nkind = "testpmd"\ncores = "4000-4095"\n'
        '[guests.a]\nvcpus = 1\npinning.vcpus = { 0 = "4000" }\n'
    )
    path = lab(tmp_path, body)
    proc = kvmlab("check", str(path))
    assert proc.returncode == 0, proc.stderr  # a lab may be meant for a bigger host
    count = len(parse_cpulist(Path("/sys/devices/system/cpu/online").read_text()))
    warnings = [line for line in proc.stdout.splitlines() if "warning" in line]
    assert warnings == [
        f"  warning: guests.a.pinning.vcpus.0: CPU 4000 is not on this host: this host has "
        f"{count} CPU{'s' if count != 1 else ''} online (0-{count - 1}); up, run, bench "
        "and tune refuse the lab on this host",
        f"  warning: switch.cores: CPUs 4000-4095 are not on this host: this host has "
        f"{count} CPU{'s' if count != 1 else ''} online (0-{count - 1}); up, run, bench "
        "and tune refuse the lab on this host",
    ]
    doc = json.loads(kvmlab("check", "-o", "json", str(path)).stdout)
    assert [w.split(":")[0] for w in doc["labs"][0]["host_warnings"]] == [
        "guests.a.pinning.vcpus.0",
        "switch.cores",
    ]


def test_tune_verify_refuses_a_cpu_this_host_lacks() -> None:
    proc = kvmlab("tune", "verify", "--isolate", "4000")
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    (line,) = proc.stderr.splitlines()
    assert line.startswith("kvmlab: --isolate 4000: CPU 4000 is not on this host: this host has")


def test_tune_verify_refuses_the_labs_switch_cores_this_host_lacks(tmp_path: Path) -> None:
    path = lab(tmp_path, '[switch]\nkind = "testpmd"\ncores = "4000"\n[guests.a]\n')
    proc = kvmlab("tune", "verify", str(path))
    assert proc.returncode == 4, proc.stderr
    (line,) = proc.stderr.splitlines()
    assert line.startswith(f"kvmlab: {path}: switch.cores: CPU 4000 is not on this host")
    assert line.endswith("name CPUs this host has, or run the lab on a host with 4001 or more CPUs")


def test_up_refuses_pinning_this_host_lacks_before_anything_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from kvmlab.runtime import lab as labrun

    def no_boot(*_: object, **__: object) -> None:
        raise AssertionError("a guest would have been booted")

    monkeypatch.setattr(labrun, "_boot_all", no_boot)
    monkeypatch.setattr(labrun, "_start_switch", no_boot)
    monkeypatch.setenv("KVMLAB_RUN_DIR", str(tmp_path / "run"))
    path = lab(tmp_path, '[guests.a]\nvcpus = 1\npinning.emulator = "4000"\n')
    monkeypatch.setattr(sys, "argv", ["kvmlab", "up", str(path)])
    with pytest.raises(SystemExit) as info:
        main()
    assert info.value.code == 4
    err = capsys.readouterr().err
    assert f"kvmlab: {path}: guests.a.pinning.emulator: CPU 4000 is not on this host" in err
