"""The guest's side of a migration, as commands through its agent (busybox and
``kvmlab-dirty`` of the self-contained image): the dirtier and the probe's echo started and
stopped, and each check of its state (memory pattern, a file, disks, kernel log), a
:class:`Check` with its evidence that never raises for a failing guest; :mod:`.workload`
decides when they run."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass

from kvmlab.errors import KvmlabError, RuntimeFailure
from kvmlab.runtime.machine import Machine

STATE_DIR = "/run/kvmlab-dirty"
CHECK_FILE = "/root/kvmlab-migration-check"
PROBE_DEVICE = "/dev/kvmlab-probe"
KERNEL_FAULT = re.compile(r"BUG|Oops|Kernel panic|general protection fault|detected stall")
BAD_KERNEL = re.compile(
    r"Oops|BUG:|Kernel panic|general protection|soft lockup|"
    r"hung_task|rcu_sched self-detected|Call Trace|segfault",
    re.I,
)


@dataclass(frozen=True)
class Check:
    """One verification: its name, whether it passed, and what was seen."""

    name: str
    ok: bool
    evidence: str
    seconds: float = 0.0


@dataclass
class Dirtier:
    """The ``kvmlab-dirty`` process in the guest."""

    pid: int
    mem_mib: int
    rate_mibs: float
    checks: int = 0


AGENT_PATIENCE = 30.0
"""How long a guest's agent may take to answer after a migration: a healthy one answers in
well under a second; a guest the migration broke often hangs instead of dying."""


def _sh(machine: Machine, script: str, timeout: float = 60.0) -> tuple[int, str]:
    result = machine.exec(
        ["/bin/sh", "-c", script], timeout=timeout, patience=AGENT_PATIENCE * machine.level_factor()
    )
    out = (result.stdout + result.stderr).decode(errors="replace")
    return result.returncode, out


def start_dirtier(machine: Machine, mem_mib: int, rate_mibs: float) -> Dirtier:
    """Start ``kvmlab-dirty`` and wait until it has filled its memory once."""
    # an earlier kvmlab-dirty (its kvmlab interrupted) would write into the new state
    code, out = _sh(
        machine,
        "killall -q kvmlab-dirty; while pidof kvmlab-dirty >/dev/null; "
        f"do sleep 0.1; done; rm -rf {STATE_DIR} && mkdir -p {STATE_DIR} && "
        "test -x /bin/kvmlab-dirty && test -e " + PROBE_DEVICE,
    )
    if code != 0:
        raise RuntimeFailure(
            f"{machine.config.name} has no kvmlab-dirty or probe port: is it "
            "migratable = true (the self-contained image)? " + out.strip()
        )
    probe = PROBE_DEVICE
    pid = machine.exec_background(
        ["/bin/kvmlab-dirty", str(mem_mib), f"{rate_mibs:g}", STATE_DIR, probe]
    )
    deadline = time.monotonic() + 60 + mem_mib / 4 * machine.level_factor()
    while time.monotonic() < deadline:
        code, out = _sh(machine, f"cat {STATE_DIR}/status 2>/dev/null; kill -0 {pid}")
        if "passes=" in out:
            return Dirtier(pid, mem_mib, rate_mibs)
        if code != 0:
            raise RuntimeFailure(f"kvmlab-dirty exited in {machine.config.name}: {out.strip()}")
        time.sleep(0.5)
    raise RuntimeFailure(f"kvmlab-dirty in {machine.config.name} did not start in time")


def status(machine: Machine) -> dict[str, float]:
    """The dirtier's last status line as numbers (passes, bytes, maxgap_us, seconds)."""
    _, out = _sh(machine, f"cat {STATE_DIR}/status")
    return {k: float(v) for k, v in re.findall(r"(\w+)=([0-9.]+)", out)}


def verify_memory(machine: Machine, dirtier: Dirtier, timeout: float = 120.0) -> Check:
    """Ask the dirtier to check every page now (SIGUSR1) and read its verdict."""
    dirtier.checks += 1
    n = dirtier.checks
    t0 = time.monotonic()
    code, out = _sh(machine, f"kill -USR1 {dirtier.pid}")
    if code != 0:
        return Check(
            "memory pattern", False, f"kvmlab-dirty (pid {dirtier.pid}) is gone: {out.strip()}"
        )
    deadline = t0 + timeout * machine.level_factor()
    while time.monotonic() < deadline:
        code, out = _sh(machine, f"grep '^{n} ' {STATE_DIR}/verify.log; kill -0 {dirtier.pid}")
        line = next((x for x in out.splitlines() if x.startswith(f"{n} ")), None)
        if line is None and code != 0 and "No such process" in out:
            return Check(
                "memory pattern", False, f"kvmlab-dirty (pid {dirtier.pid}) died before its verdict"
            )
        if line is not None:
            ok = line.split()[1] == "ok"
            took = time.monotonic() - t0
            what = f"{dirtier.mem_mib} MiB, every word of every page: {line[len(str(n)) + 1 :]}"
            return Check("memory pattern", ok, what, took)
        time.sleep(0.2)
    return Check("memory pattern", False, f"no verdict from kvmlab-dirty in {timeout:g} s")


def stop_dirtier(machine: Machine, dirtier: Dirtier) -> None:
    """Stop the dirtier (it exits on SIGTERM)."""
    _sh(machine, f"kill {dirtier.pid} 2>/dev/null; true")


def start_echo(machine: Machine, port: int) -> int:
    """``kvmlab-echo PORT`` in the guest: the network probe's far end; its pid."""
    return machine.exec_background(["/bin/kvmlab-echo", str(port)])


def wait_echo_bound(machine: Machine, port: int, pid: int) -> str | None:
    """Wait until the echo (``pid``) holds UDP ``port`` in the guest; None once it does, or
    why it never will (it exited). A guest busy dirtying its memory may take a while to
    schedule it; each poll is the agent answering, so the wait shows progress."""
    hexport = f":{port:04X} "
    deadline = time.monotonic() + AGENT_PATIENCE * machine.level_factor()
    while time.monotonic() < deadline:
        code, out = _sh(machine, f"kill -0 {pid} && grep -c '{hexport}' /proc/net/udp")
        if code != 0 and "No such process" in out:
            return f"the echo in the guest (pid {pid}) exited before it took port {port}"
        if code == 0 and out.strip().splitlines()[-1:] != ["0"]:
            return None
        time.sleep(0.2)
    return f"the echo in the guest did not take port {port} in {AGENT_PATIENCE:g} s"


def stop_echo(machine: Machine, pid: int) -> None:
    """Stop the echo (it exits on SIGTERM)."""
    _sh(machine, f"kill {pid} 2>/dev/null; true")


def write_check_file(machine: Machine, mib: int = 8) -> str:
    """Write random data to a file in the guest; return its sha256."""
    code, out = _sh(
        machine,
        f"dd if=/dev/urandom of={CHECK_FILE} bs=1M count={mib} "
        f"2>/dev/null && sync && sha256sum {CHECK_FILE}",
    )
    if code != 0:
        raise RuntimeFailure(f"cannot write {CHECK_FILE} in {machine.config.name}: {out.strip()}")
    return out.split()[0]


def check_file(machine: Machine, digest: str) -> Check:
    """The file written before the migration reads back identical."""
    code, out = _sh(machine, f"sha256sum {CHECK_FILE}")
    got = out.split()[0] if code == 0 and out.split() else out.strip()
    return Check(
        "file written before",
        code == 0 and got == digest,
        f"sha256 {got[:16]}... (before {digest[:16]}...)",
    )


def kernel_lines(machine: Machine) -> int:
    """How many lines the guest kernel has logged so far."""
    _, out = _sh(machine, "dmesg | wc -l")
    return int(out.strip() or 0)


def check_kernel(machine: Machine, since_line: int) -> Check:
    """No oops, BUG, panic, lockup or segfault in the kernel log since ``since_line``."""
    code, out = _sh(machine, f"dmesg | tail -n +{since_line + 1}")
    bad = [line for line in out.splitlines() if BAD_KERNEL.search(line)]
    if code != 0:
        return Check("kernel log", False, f"dmesg failed: {out.strip()[-200:]}")
    if bad:
        return Check("kernel log", False, "; ".join(bad[:3]))
    return Check("kernel log", True, f"{len(out.splitlines())} new line(s), no oops/BUG/panic")


def check_agent(machine: Machine) -> Check:
    """The guest agent answers a command."""
    t0 = time.monotonic()
    try:
        code, out = _sh(machine, "cat /proc/uptime", timeout=30)
    except KvmlabError as exc:
        return Check("guest agent", False, str(exc))
    return Check(
        "guest agent",
        code == 0,
        f"uptime {out.split()[0] if out else '?'} s",
        time.monotonic() - t0,
    )


DISK_CHECK_MIB = 1024
"""How much of each copied disk the guest reads back (from its start): a whole small disk,
the first GiB of a large one (the guest reads at TCG speed here)."""


@dataclass(frozen=True)
class DiskDigest:
    """A copied disk as the guest read it before the migration."""

    device: str
    """The guest's block device (``vdb``), found by its place among the virtio disks."""
    size: int
    read: int
    """How many bytes from its start were hashed."""
    sha256: str
    mounted: str | None = None
    """Where the guest has it mounted (then it is not compared: its own writes change it)."""


def _disk_script(devices: list[str]) -> str:
    """Drop the page cache (a read must reach the disk, not the RAM that migrated), then
    for each device: its size and mount point, and the sha256 of its first bytes."""
    lines = ["sync", "echo 3 > /proc/sys/vm/drop_caches"]
    for dev in devices:
        lines.append(
            f"s=$(($(cat /sys/block/{dev}/size) * 512)); "
            f"m=$(awk '$1 == \"/dev/{dev}\" {{print $2; exit}}' /proc/mounts); "
            f"h=$(head -c {DISK_CHECK_MIB * 1048576} /dev/{dev} | sha256sum); "
            f'echo "disk {dev} $s ${{h%% *}} ${{m:--}}"'
        )
    return "\n".join(lines)


def guest_disks(machine: Machine, disks: list[tuple[str, int]]) -> list[str]:
    """The guest's devices of the copied disks (``(target, bytes)`` in the domain's order):
    its virtio-blk disks (``vd*``) and its SCSI disks (``sd*``), each kind in the order the
    guest named them, must match the targets of that kind one for one, size for size."""
    code, out = _sh(
        machine,
        'cd /sys/block && for d in vd* sd*; do if [ -e "$d" ]; then echo "$d $(cat "$d/size")"; '
        "fi; done",
    )
    if code != 0:
        raise RuntimeFailure(f"cannot list the disks of {machine.config.name}: {out.strip()}")
    found = [line.split() for line in out.splitlines() if len(line.split()) == 2]
    devices: dict[str, str] = {}
    for kind in ("vd", "sd"):
        wanted = [(t, size) for t, size in disks if t.startswith(kind)]
        seen = sorted((d for d in found if d[0].startswith(kind)), key=lambda d: (len(d[0]), d))
        if len(seen) != len(wanted):
            raise RuntimeFailure(
                f"{machine.config.name} shows {len(seen)} {kind}* disk(s), the domain copies "
                f"{len(wanted)}: cannot tell which guest device is which ({out.strip()[-200:]})"
            )
        for (dev, sectors), (target, size) in zip(seen, wanted, strict=True):
            if int(sectors) * 512 != size:
                raise RuntimeFailure(
                    f"{machine.config.name}'s {dev} has {int(sectors) * 512} bytes, the disk "
                    f"{target} copied in its place {size}: cannot tell which device is which"
                )
            devices[target] = dev
    return [devices[target] for target, _ in disks]


def read_disks(machine: Machine, devices: list[str]) -> list[DiskDigest]:
    """Each device read by the guest from the disk itself (page cache dropped first)."""
    if not devices:
        return []
    code, out = _sh(machine, _disk_script(devices), timeout=600)
    got = {}
    for line in out.splitlines():
        words = line.split()
        if len(words) == 5 and words[0] == "disk":
            _, dev, size, digest, mount = words
            read = min(int(size), DISK_CHECK_MIB * 1048576)
            got[dev] = DiskDigest(dev, int(size), read, digest, None if mount == "-" else mount)
    if code != 0 or set(got) != set(devices):
        raise RuntimeFailure(
            f"cannot read the disks {', '.join(devices)} in {machine.config.name}: "
            f"{out.strip()[-300:]}"
        )
    return [got[dev] for dev in devices]


def disks_read(disks: tuple[DiskDigest, ...]) -> Check:
    """What the guest read of the disks to copy, before the migration."""
    said = [
        f"{d.device} ({d.read // 1048576} MiB of {d.size // 1048576} MiB): sha256 "
        f"{d.sha256[:16]}...{f' (mounted at {d.mounted})' if d.mounted else ''}"
        for d in disks
    ]
    return Check("copied disks", True, "; ".join(said))


def check_disks(machine: Machine, before: list[DiskDigest]) -> Check:
    """Every copied disk the guest does not write itself reads back as before the
    migration, from the destination's copy (the guest's page cache dropped first)."""
    t0 = time.monotonic()
    now = {d.device: d for d in read_disks(machine, [d.device for d in before])}
    bad, said = [], []
    for old in before:
        new = now[old.device]
        what = f"{old.device} ({old.read // 1048576} MiB of {old.size // 1048576} MiB)"
        if old.mounted is not None:
            said.append(f"{old.device} not compared: mounted at {old.mounted}, it changes")
        elif new.sha256 != old.sha256:
            bad.append(f"{what}: sha256 {new.sha256[:16]}... against {old.sha256[:16]}... before")
        else:
            said.append(f"{what}: sha256 {new.sha256[:16]}... as before")
    return Check("copied disks", not bad, "; ".join(bad + said), time.monotonic() - t0)
