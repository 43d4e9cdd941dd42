"""``kvmlab image``, ``up``, ``ps``, ``exec``, ``console`` and ``down``."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType

from kvmlab.errors import UsageError
from kvmlab.guest.image import GuestImage
from kvmlab.runtime.errors import Interrupted, StateError
from kvmlab.runtime.rundir import GuestRecord, LabDir, running_labs
from kvmlab.spec.units import format_size


@contextmanager
def interruptible(what: str) -> Iterator[None]:
    """SIGTERM behaves like Ctrl-C; both end as :class:`Interrupted` after clean-up ran."""

    def on_term(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, on_term)
    try:
        yield
    except KeyboardInterrupt:
        raise Interrupted(f"interrupted while {what}; everything it started was stopped") from None
    finally:
        signal.signal(signal.SIGTERM, previous)


def run_image(rebuild: bool, cloud_disk: Path | None = None) -> None:
    """Build (or find in the cache) the default guest image and describe it."""
    from kvmlab.guest.image import build_default_image
    from kvmlab.guest.kernel import default_cache_dir

    if rebuild:
        import shutil

        shutil.rmtree(default_cache_dir() / "images", ignore_errors=True)
    start = time.monotonic()
    image = build_default_image()
    print(f"default guest image {image.key} ({time.monotonic() - start:.1f} s)")
    print(f"  kernel   {image.kernel}  ({image.kernel_package}, {image.kernel_release})")
    print(f"  initrd   {image.initrd}")
    print(f"  share    {image.share} (tag {image.share_tag}): the host root, read-only")
    print(f"  cmdline  {image.append}")
    if cloud_disk is not None:
        from kvmlab.guest.diskimage import build_test_disk_image

        start = time.monotonic()
        cloud_disk.parent.mkdir(parents=True, exist_ok=True)
        written = build_test_disk_image(cloud_disk)
        print(f"cloud-init disk {written} ({time.monotonic() - start:.1f} s): Debian 12 with "
              "cloud-init and qemu-guest-agent, a qcow2 overlay on the cached base")  # fmt: skip


def image_factory() -> Callable[[], GuestImage]:
    """How to get the default image: the outer level's entry inside a guest, else build it."""
    from kvmlab.guest.image import build_default_image, open_image
    from kvmlab.runtime.nested import IMAGE_ENV

    if entry := os.environ.get(IMAGE_ENV):
        return lambda: open_image(Path(entry), verify=False)
    return build_default_image


def run_up(
    lab_path: Path, guest: str | None, within: str | None = None, as_json: bool = False
) -> None:
    """Start a lab's guests and print their boot stages."""
    from rich.console import Console
    from rich.table import Table

    from kvmlab.cli.hostinfo import host_accel, print_nested_preflight
    from kvmlab.runtime import lab as labrun
    from kvmlab.spec import load_lab

    loaded = load_lab(lab_path)
    if within is not None and (loaded.lab.find(within) is None or not loaded.lab.guests):
        raise UsageError(f"lab {loaded.lab.name} has no guest hypervisor {within!r}")
    host, choice = host_accel()
    console = Console(stderr=True)
    console.print(f"accelerator for accel=auto: {choice.accel} ({choice.reason})")
    if within is None:
        print_nested_preflight(loaded.lab, choice, console)
    with interruptible(f"starting lab {loaded.lab.name}"), console.status("starting") as status:

        def progress(text: str) -> None:
            status.update(text)
            console.print(f"  {text}")

        machines = labrun.up(
            loaded, host, image_factory(),
            only=guest, progress=progress, within=within,
        )  # fmt: skip
    if as_json:
        from dataclasses import asdict

        print(json.dumps([asdict(m.record()) for m in machines]))
        return
    table = Table(title=f"lab {loaded.lab.name} is up: boot stages in seconds (measured)")
    stages = ["qemu", "kernel", "init", "agent", "guest", "total"]
    shown = [s for s in stages if any(s in m.boot for m in machines)]
    for column in ["guest", "accel", *shown]:
        table.add_column(column, justify="left" if column in ("guest", "accel") else "right")
    for m in machines:
        row = [f"{m.config.name}", m.config.accel]
        table.add_row(*row, *(f"{m.boot[s]:.2f}" if s in m.boot else "-" for s in shown))
    Console().print(table)


def parse_address(address: str) -> tuple[str, tuple[str, ...]]:
    """``"lab/l1/l2"`` -> ``("lab", ("l1", "l2"))``."""
    parts = [p for p in address.split("/") if p]
    if len(parts) < 2:
        raise UsageError(f"{address!r} is not a guest address; write LAB/GUEST (e.g. basic/vm1)")
    return parts[0], tuple(parts[1:])


def find_guest(address: str) -> tuple[Path, GuestRecord]:
    """The run directory and record of a running guest (at any level), or a clear error."""
    lab, path = parse_address(address)
    lab_dir = LabDir.of(lab)
    run_dir = lab_dir.guest_dir(path)
    record = GuestRecord.load(run_dir)
    if record is None:
        up = [rec.name for _, rec in lab_dir.records()]
        hint = f" (running: {', '.join(up)})" if up else f" (lab {lab} is not up)"
        raise StateError(f"no running guest {address}{hint}")
    if not record.running(run_dir):
        raise StateError(
            f"{address} is not running: its QEMU exited; 'kvmlab down {lab}' cleans up"
        )
    return run_dir, record


def run_exec(address: str, command: list[str], timeout: float) -> int:
    """Run a command in a guest, pass its output through, return its exit code."""
    from kvmlab.runtime.machine import Machine

    if not command:
        raise UsageError("give the command to run after --, e.g. kvmlab exec basic/vm1 -- uname -r")
    run_dir, record = find_guest(address)
    result = Machine.attach(run_dir, record).exec(command, timeout=timeout)
    sys.stdout.buffer.write(result.stdout)
    sys.stdout.flush()
    sys.stderr.buffer.write(result.stderr)
    sys.stderr.flush()
    return result.returncode if result.returncode >= 0 else 128 - result.returncode


def run_down(lab: str, force: bool) -> None:
    """Stop a lab's guests and remove its run state."""
    from kvmlab.runtime import lab as labrun

    with interruptible(f"stopping lab {lab}"):
        stopped = labrun.down(lab, force=force, progress=lambda t: print(f"  {t}", file=sys.stderr))
    print(f"lab {lab} is down ({len(stopped)} guest(s) stopped)")


def run_console(address: str) -> None:
    """Attach the terminal to a guest's serial console (Ctrl-] detaches)."""
    from kvmlab.cli.console import attach
    from kvmlab.render.devices.control import CONSOLE_SOCKET

    run_dir, record = find_guest(address)
    if record.via is not None:
        outer = f"{record.lab}/{record.via}"
        raise UsageError(f"{address} runs inside {outer}: its console is there "
                         f"('kvmlab exec {outer} -- kvmlab console ...')")  # fmt: skip
    attach(run_dir / CONSOLE_SOCKET)


def run_ps(output: str) -> None:
    """List running labs and guests with host CPU next to guest CPU."""
    from kvmlab.runtime.usage import sample_usage

    rows = []
    for lab_dir in running_labs():
        for run_dir, rec in lab_dir.records():
            rows.append((run_dir, rec))
    usage = sample_usage(rows)
    now = time.time()
    out: list[dict[str, object]] = []
    for run_dir, rec in rows:
        host_cpu, guest_cpu = usage.get(rec.pid, (None, None))
        out.append({
            "lab": rec.lab, "guest": "/".join(rec.address), "address": rec.name,
            "level": f"L{len(rec.address)}", "pid": rec.pid,
            "state": "running" if rec.running(run_dir) else "dead",
            "accel": rec.accel, "vcpus": rec.vcpus, "memory_bytes": rec.memory,
            "uptime_s": round(now - rec.started, 1),
            "host_cpu_pct": None if rec.via else host_cpu, "guest_cpu_pct": guest_cpu,
            "via": rec.via, "boot_s": rec.boot,
        })  # fmt: skip
    if output == "json":
        print(json.dumps(out, indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title="running guests (CPU in % of one host CPU, sampled over 0.5 s)")
    for column in ("address", "level", "pid", "state", "accel", "vCPUs", "memory", "uptime",
                   "host CPU%", "guest CPU%"):  # fmt: skip
        table.add_column(column)
    for row in out:
        table.add_row(
            str(row["address"]), str(row["level"]), str(row["pid"]), str(row["state"]),
            str(row["accel"]), str(row["vcpus"]), format_size(int(str(row["memory_bytes"]))),
            f"{row['uptime_s']:.0f} s",
            "-" if row["host_cpu_pct"] is None else f"{row['host_cpu_pct']:.0f}",
            "-" if row["guest_cpu_pct"] is None else f"{row['guest_cpu_pct']:.0f}",
        )  # fmt: skip
    Console().print(table if out else "no running guests")
