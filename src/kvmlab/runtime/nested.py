"""Guests inside guest hypervisors: kvmlab runs itself in L1 to start and stop L2.

The default image shares the host's root, so the same kvmlab (same path, same venv)
exists inside every guest hypervisor. L0 runs ``kvmlab up LAB --within l1 --json``
through L1's guest agent; L1 starts l1's guests with KVM when its ``/dev/kvm`` works.
Each L2's agent is then bridged (socat, inside L1) to a virtio-serial port of L1
whose host end is a socket in L1's run directory, and L0 records the L2 as a guest
of its own whose agent socket is that relay: ``exec``, ``ps`` and benchmarks reach
L2 directly, with no kvmlab process inside L1 per call (Python under TCG starts slowly).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from kvmlab.errors import KvmlabError, ProcessFailure
from kvmlab.guest.agent import ExecResult
from kvmlab.guest.errors import GuestExecTimeout
from kvmlab.guest.image import GuestImage
from kvmlab.host.accel import OUTER_ACCEL_ENV
from kvmlab.jsondoc import opened
from kvmlab.render.devices.control import RELAY_PORT
from kvmlab.render.runfiles import AGENT_SOCKET
from kvmlab.runtime.machine import Machine
from kvmlab.runtime.records import GuestNic
from kvmlab.runtime.rundir import GuestRecord, LabDir
from kvmlab.runtime.waits import LIMITS
from kvmlab.spec import LoadedLab

IMAGE_ENV = "KVMLAB_IMAGE"
"""Names the image entry the outer level built, so an inner kvmlab reuses it as it is."""
INNER_RUN_ROOT = "/run/kvmlab"
"""kvmlab's run root inside guests (root, no KVMLAB_RUN_DIR)."""


def kvmlab_argv(*args: str) -> list[str]:
    """This kvmlab's command line, valid inside guests too (the host root is their root)."""
    return [str(Path(sys.executable).with_name("kvmlab")), *args]


def guest_env(image: GuestImage | None = None, accel: str | None = None) -> dict[str, str]:
    """The environment kvmlab runs with inside a guest (the agent's own is nearly empty)."""
    env = {
        "HOME": "/root",
        "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "LANG": "C.UTF-8",
        "COLUMNS": "200",
    }
    if image is not None:
        env[IMAGE_ENV] = str(image.kernel.parent)
    if accel is not None:
        env[OUTER_ACCEL_ENV] = accel
    return env


def inner_failure(result: ExecResult, argv: list[str], what: str) -> ProcessFailure:
    """The error for a kvmlab command that failed inside a guest, with its own error lines."""
    lines = (result.stderr or result.stdout).decode(errors="replace").splitlines()
    # The inner kvmlab's own error lines say what went wrong; other output is context.
    ours = [line for line in lines if line.startswith("kvmlab:")]
    tail = (ours or lines)[-15:]
    why = ours[0].removeprefix("kvmlab:").strip() if ours else ""
    return ProcessFailure(
        f"{what} inside the guest" + (f": {why}" if why else ""), argv, result.returncode, tail
    )


def _checked(machine: Machine, argv: list[str], result: ExecResult, what: str) -> ExecResult:
    if result.returncode != 0:
        raise inner_failure(result, argv, f"{machine.config.name}: {what} failed")
    return result


def inner_evidence(machine: Machine, lab: str) -> list[str]:
    """The guest hypervisor's kernel log and its guests' logs, for an inner failure."""
    script = (
        'echo "dmesg (last lines):"; dmesg | tail -n 12; '
        'for f in "$1"/*/serial.log "$1"/*/qemu.log; do [ -s "$f" ] || continue; '
        'echo "$f (last lines):"; tail -n 12 "$f"; done'
    )
    argv = ["sh", "-c", script, "evidence", f"{INNER_RUN_ROOT}/{lab}"]
    try:
        result = machine.exec(argv, timeout=30)
    except KvmlabError as exc:
        return [f"(no evidence from inside the guest: {exc})"]
    return result.stdout.decode(errors="replace").splitlines()


def copy_lab(machine: Machine, loaded: LoadedLab) -> None:
    """Put the lab file at the same path inside the guest (host /tmp is private there),
    with the directory its relative paths are resolved against."""
    argv = [
        "sh",
        "-c",
        'mkdir -p "$1" "$(dirname "$2")" && cat > "$2"',
        "sh",
        str(loaded.directory),
        str(loaded.path),
    ]
    result = machine.exec(argv, timeout=60, input=loaded.path.read_bytes())
    _checked(machine, argv, result, "copying the lab file")


def relay_script(lab: str, child: str) -> list[str]:
    """argv of the loop inside a guest hypervisor bridging ``child``'s agent to its port."""
    port, sock = RELAY_PORT.format(child), f"{INNER_RUN_ROOT}/{lab}/{child}/{AGENT_SOCKET}"
    script = (
        'for d in /sys/class/virtio-ports/*; do [ "$(cat $d/name)" = "$1" ] && '
        'p=/dev/${d##*/}; done; [ -n "$p" ] || exit 1; '
        'while :; do socat "$p" UNIX-CONNECT:"$2"; sleep 0.2; done'
    )
    return ["sh", "-c", script, "relay", port, sock]


def inner_up_argv(loaded: LoadedLab, address: str) -> list[str]:
    """``kvmlab up`` of the guests inside guest hypervisor ``address``, run there. That
    kvmlab reads the same lab file, so a variant is named (else its changes to the inner
    guests would be lost)."""
    argv = kvmlab_argv("up", str(loaded.path), "--within", address, "--json")
    return [*argv, "--variant", loaded.variant] if loaded.variant is not None else argv


def start_children(
    machine: Machine, loaded: LoadedLab, address: str, image: GuestImage | None
) -> list[GuestRecord]:
    """Start the guests inside ``machine`` and record them here, reachable by relay."""
    copy_lab(machine, loaded)
    argv = inner_up_argv(loaded, address)
    limit = LIMITS["inner-up"]
    timeout = limit.value("ceiling", machine.level_factor())
    try:
        result = machine.exec(argv, timeout=timeout, env=guest_env(image, machine.config.accel))
    except GuestExecTimeout:
        stalled = limit.exceeded(f"{machine.config.name}: starting its guests", timeout)
        raise ProcessFailure(
            str(stalled), argv, None, inner_evidence(machine, loaded.lab.name)
        ) from None
    if result.returncode != 0:
        failure = inner_failure(result, argv, f"{machine.config.name}: starting its guests failed")
        failure.log_tail.extend(inner_evidence(machine, loaded.lab.name))
        raise failure
    try:
        inner: list[dict[str, Any]] = opened(json.loads(result.stdout), "up")["guests"]
    except (ValueError, KeyError) as exc:
        raise ProcessFailure(
            f"{machine.config.name}: the kvmlab inside answered no guest records ({exc})",
            argv,
            result.returncode,
        ) from None
    lab_dir = LabDir.of(loaded.lab.name)
    marker = machine.record().marker or str(machine.run_dir)  # how its QEMU is recognised
    records = []
    for row in inner:
        child = row["address"][-1]
        machine.exec_background(relay_script(loaded.lab.name, child))
        run_dir = lab_dir.create_guest_dir([*machine.config.address, child])
        (run_dir / AGENT_SOCKET).symlink_to(machine.relay_socket(child))
        record = GuestRecord(
            lab=loaded.lab.name,
            address=[*machine.config.address, child],
            pid=machine.pid or 0,
            argv=row["argv"],
            accel=row["accel"],
            accel_reason=row["accel_reason"],
            vcpus=row["vcpus"],
            memory=row["memory"],
            started=row["started"],
            boots_image=row["boots_image"],
            boot=row["boot"],
            under_kvm=row.get("under_kvm", {}),
            via="/".join(machine.config.address),
            marker=marker,
            migratable=row.get("migratable", False),
            nics=[GuestNic(**nic) for nic in row.get("nics", [])],
        )
        record.save(run_dir)
        records.append(record)
    return records


def stop_children(machine: Machine, lab: str) -> None:
    """``kvmlab down LAB`` inside the guest hypervisor (its guests stop before it does)."""
    argv = kvmlab_argv("down", lab)
    limit = LIMITS["inner-down"]
    timeout = limit.value("ceiling", machine.level_factor())
    try:
        result = machine.exec(argv, timeout=timeout, env=guest_env())
    except GuestExecTimeout:
        raise limit.exceeded(f"{machine.config.name}: stopping its guests", timeout) from None
    if result.returncode not in (0, 2):  # 2: nothing was up there
        _checked(machine, argv, result, "stopping its guests")


def hypervisor_of(record: GuestRecord) -> Machine | None:
    """The guest hypervisor a nested guest runs in, as a machine of this level (``None``
    when its record is gone)."""
    from kvmlab.runtime import backends

    assert record.via is not None
    via = record.via.split("/")
    lab_dir = LabDir.of(record.lab)
    hyper = next((e.record for e in lab_dir.entries() if list(e.address) == via), None)
    if hyper is None:
        return None
    return backends.attach(lab_dir.guest_dir(via), hyper)


def inner_path(record: GuestRecord) -> list[str]:
    """A nested guest's path as the kvmlab inside its hypervisor knows it."""
    assert record.via is not None
    return record.address[len(record.via.split("/")) :]


def inner_address(record: GuestRecord) -> str:
    """A nested guest's address as the kvmlab inside its hypervisor knows it."""
    return "/".join([record.lab, *inner_path(record)])


def unseen_install() -> str | None:
    """Why a guest hypervisor cannot run this kvmlab, or None: a guest sees the host's root,
    but mounts its own ``/tmp``, ``/run``, ... (:data:`~kvmlab.runtime.hostview.LIVE_DIRS`),
    so a kvmlab installed below one of them is not there for the kvmlab inside."""
    from kvmlab.runtime.hostview import LIVE_DIRS

    for what, path in (
        ("its Python environment", Path(sys.prefix)),
        ("its package", Path(__file__).resolve().parents[1]),
    ):
        where = str(path.resolve())
        for live in LIVE_DIRS:
            if where == live or where.startswith(live + "/"):
                return (
                    f"kvmlab's install ({what}, {where}) lies under {live}, which every guest "
                    f"mounts its own of, so a guest hypervisor cannot run the kvmlab inside it: "
                    f"install kvmlab outside {live} (clone it into /root or /opt, then make deps)"
                )
    return None
