"""Boot to a usable command: kvmlab's default guest against virtme-ng, same kernel, TCG.

Run: .venv/bin/python benchmarks/boot.py [--runs N] [--warmup N] [--json FILE] [--quiet S]
     .venv/bin/python benchmarks/boot.py --smoke   # one kvmlab boot, no virtme-ng (the tests)

Both tools boot the same Debian generic kernel package (the one kvmlab's default image is
built from) with the same QEMU under TCG (multi-threaded, ``-cpu max``, q35), 2 vCPUs and
1 GiB, sharing the host root read-only over 9p. Runs alternate between the tools (kvmlab
first in even rounds, vng first in odd ones) after ``--warmup`` unrecorded rounds. Times are
seconds on the host's monotonic clock; min, median and max over ``--runs`` per tool.

- kvmlab, through the library as ``kvmlab up`` does: a lab file with one guest in a temp
  directory, booted by ``kvmlab.runtime.lab.started()`` (private ``KVMLAB_RUN_DIR``: the lab
  directory and its lock, rendering, QEMU start until the guest agent answers, whose boot
  stages are reported too), then ``exec(["true"])`` in it. "ready" = from entering
  ``started()`` until ``true`` returned, the time to a usable command; the teardown after it
  is not counted. The image boots the package's uncompressed vmlinux through PVH, from
  kvmlab's image cache (built before timing). kvmlab's own boot timeout applies.
- virtme-ng: wall time of the whole ``vng --run VMLINUZ --disable-kvm --disable-microvm
  --force-9p --cpus 2 --memory 1G --exec true`` command, its initramfs build included,
  where VMLINUZ is the package's bzImage from kvmlab's kernel cache. vng resolves modules
  with kmod's modprobe, which needs the ``modules.*.bin`` indexes that the cache (made with
  busybox depmod) lacks, so vng gets a hard-linked view of the unpacked package with kmod's
  depmod run in it (the cache is not changed). virtme-ng comes from PyPI into its own venv,
  ``~/.cache/kvmlab/bench-venvs/virtme-ng``. The host needs file (vng asks it whether
  busybox is static), kmod (modprobe, depmod) and udev
  (virtme's init runs systemd-udevd to name the virtio ports ``--exec`` talks through;
  without it vng exits 255).

The machine has 2 CPUs, so for every run the share of the host's CPU that other processes
took meanwhile is reported too (busy time from /proc/stat less this process's and its
children's): a run with a high share was slowed by someone else. The ratio of medians is
given over all runs and over the quiet ones (others under ``--quiet``, 10 %) alone.

Every QEMU and vng process started here is stopped, and temp dirs removed, on any exit.
A benchmark, not a test: it exits non-zero only when a run or a set-up step fails.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

from kvmlab import __version__ as kvmlab_version
from kvmlab.errors import KvmlabError
from kvmlab.guest.image import FLAVOUR_FOR_SHARE, GuestImage, build_default_image
from kvmlab.guest.kernel import Kernel, default_cache_dir, fetch_kernel, resolve_kernel_package
from kvmlab.progress import QUIET
from kvmlab.runtime import backends
from kvmlab.runtime.lab import HostAccel, Launch, guest_config, started
from kvmlab.runtime.machine import MachineConfig
from kvmlab.runtime.rundir import LabDir
from kvmlab.spec import LoadedLab, load_lab

VCPUS = 2
MEMORY = "1G"
LAB = "bootbench"
GUEST = "vm"
LAB_TOML = f"""name = "{LAB}"
description = "benchmarks/boot.py: one guest booting kvmlab's default image"

[guests.{GUEST}]
vcpus = {VCPUS}
memory = "{MEMORY}"
accel = "tcg"
"""
HOST = HostAccel("tcg", "benchmarks/boot.py compares both tools under TCG")
VNG_PACKAGE = "virtme-ng"
VNG_VERSION = "1.42"
SBIN = ("/usr/local/sbin", "/usr/sbin", "/sbin")
KVMLAB_MEASURES = {  # key in a run's result -> label in the table
    "ready": "ready (up + exec)",
    "qemu": "  qemu start to QMP",
    "kernel": "  firmware + kernel",
    "init": "  init to agent start",
    "agent": "  agent first answer",
    "guest": "  guest (no markers)",
    "total": "  launch total",
    "exec": "  exec true",
}


class BenchError(Exception):
    """A run or a set-up step failed; the message says which and shows the output's tail."""


@dataclass
class Series:
    """One tool's samples: measure -> value per recorded run (seconds, or a CPU share)."""

    tool: str
    command: str
    argv: list[str]
    samples: dict[str, list[float]] = field(default_factory=dict)

    def add(self, values: dict[str, float]) -> None:
        for key, value in values.items():
            self.samples.setdefault(key, []).append(value)

    def quiet(self, key: str, share: float) -> list[float]:
        """``key``'s values from the runs during which others took less than ``share``."""
        pairs = zip(self.samples[key], self.samples["others_cpu_share"], strict=True)
        return [value for value, others in pairs if others < share]

    def summary(self) -> dict[str, dict[str, float]]:
        return {
            key: {"min": min(v), "median": statistics.median(v), "max": max(v)}
            for key, v in self.samples.items()
        }


# -- small helpers ----------------------------------------------------------------------------


def search_path(extra: Sequence[str] = ()) -> str:
    """PATH with ``extra`` first and the sbin directories last (modprobe lives there)."""
    parts = [*extra, *os.environ.get("PATH", "/usr/bin:/bin").split(os.pathsep), *SBIN]
    return os.pathsep.join(dict.fromkeys(p for p in parts if p))


def run(argv: Sequence[str], what: str, timeout: float, env: dict[str, str] | None = None) -> str:
    """Run a set-up command; its stdout, or BenchError with the output's tail."""
    try:
        proc = subprocess.run(
            list(argv),
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise BenchError(f"{what}: {exc}") from exc
    if proc.returncode != 0:
        tail = "\n  ".join((proc.stdout + proc.stderr).strip().splitlines()[-10:])
        raise BenchError(f"{what}: {shlex.join(argv)} exited {proc.returncode}\n  {tail}")
    return proc.stdout


def kill_group(pgid: int, grace: float = 3.0) -> None:
    """SIGTERM the process group (a vng run and its QEMU), then SIGKILL; quiet if gone."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            try:
                os.killpg(pgid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.05)


def processes_mentioning(markers: Sequence[str]) -> list[int]:
    """Pids (not ours) whose command line contains one of ``markers`` (our temp paths)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if any(m in cmdline for m in markers):
            found.append(int(proc.name))
    return found


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM unwinds like Ctrl-C, so every ``with`` and ``finally`` below still runs."""

    def on_term(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, on_term)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


# -- kvmlab -----------------------------------------------------------------------------------


@dataclass
class Kvmlab:
    """What kvmlab boots: the lab, the default image, and the guest's machine config."""

    loaded: LoadedLab
    image: GuestImage
    config: MachineConfig


def kvmlab_setup(work: Path) -> Kvmlab:
    """The one-guest lab in ``work``, the default image (built now, not while timing) and the
    guest's config as ``started()`` renders it (for its argv)."""
    lab_file = work / "lab.toml"
    lab_file.write_text(LAB_TOML)
    loaded = load_lab(lab_file)
    image = build_default_image()
    guest = loaded.lab.guests[GUEST]
    run_dir = LabDir.of(LAB).guest_dir((GUEST,))  # rendered only; started() creates it
    planned = guest_config(loaded, (GUEST,), guest, HOST, run_dir, image)
    config = backends.QEMU.machine(loaded, (GUEST,), guest, planned, QUIET).config
    if config.accel != "tcg":
        raise BenchError(f"kvmlab chose accelerator {config.accel}, not tcg")
    return Kvmlab(loaded, image, config)


def kernel_package(image: GuestImage) -> Kernel:
    """The unpacked kernel package the default image was built from (for vng)."""
    package = resolve_kernel_package(FLAVOUR_FOR_SHARE[image.share])
    if image.kernel_package != f"{package.name}={package.version}":
        raise BenchError(
            f"the default image was built from {image.kernel_package}, but apt now resolves "
            f"{package.name}={package.version}; the two tools would boot different kernels"
        )
    return fetch_kernel(package)


def kvmlab_run(lab: Kvmlab) -> dict[str, float]:
    """One boot as ``kvmlab up`` does it, ``true`` run in it; the boot stages and ready."""
    start = time.monotonic()
    with started(lab.loaded, Launch(HOST, lambda: lab.image)) as machines:
        [machine] = machines
        result = machine.exec(["true"], timeout=60.0)
        ready = time.monotonic() - start
        stages = dict(machine.boot)
    if result.returncode != 0:
        raise BenchError(f"kvmlab: 'true' exited {result.returncode} in the guest")
    return {"ready": ready, **stages, "exec": ready - stages["total"]}


# -- virtme-ng --------------------------------------------------------------------------------


def vng_env(venv: Path) -> dict[str, str]:
    """vng runs virtme-run from PATH, and modprobe/depmod from sbin."""
    return {**os.environ, "PATH": search_path([str(venv / "bin")])}


def vng_version(venv: Path) -> str | None:
    """``1.42`` from ``vng --version``, or None when the venv has no working vng."""
    if not (venv / "bin" / "vng").exists():
        return None
    try:
        out = run([str(venv / "bin" / "vng"), "--version"], "vng --version", 60, vng_env(venv))
    except BenchError:
        return None
    return out.split()[-1] if out.split() else None


def ensure_vng(venv: Path, version: str) -> None:
    """Create the separate venv and install ``virtme-ng==version`` into it when needed."""
    if vng_version(venv) == version:
        return
    if not (venv / "bin" / "python").exists():
        print(f"creating {venv}", file=sys.stderr)
        venv.parent.mkdir(parents=True, exist_ok=True)
        run([sys.executable, "-m", "venv", str(venv)], "creating the virtme-ng venv", 300)
    print(f"installing {VNG_PACKAGE}=={version} into {venv}", file=sys.stderr)
    run(
        [
            str(venv / "bin" / "python"),
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            f"{VNG_PACKAGE}=={version}",
        ],
        f"installing {VNG_PACKAGE}",
        900,
    )
    if (found := vng_version(venv)) != version:
        raise BenchError(f"{venv}: vng --version says {found}, not {version}")


def check_vng_host() -> None:
    """The host tools vng needs and kvmlab does not."""
    path = search_path()
    needed = (("modprobe", "kmod"), ("depmod", "kmod"), ("file", "file"))
    missing = [(tool, package) for tool, package in needed if shutil.which(tool, path=path) is None]
    udevd = [Path(d, "systemd-udevd") for d in ("/usr/lib/systemd", "/lib/systemd")]
    if not any(p.exists() for p in udevd) and shutil.which("udevd", path=path) is None:
        missing.append(("systemd-udevd", "udev"))
    if missing:
        tools = ", ".join(f"{tool} ({package})" for tool, package in missing)
        packages = " ".join(sorted({package for _, package in missing}))
        raise BenchError(f"virtme-ng needs {tools} on the host: apt-get install {packages}")


def _link_or_copy(src: str, dst: str) -> str:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)
    return dst


def modules_view(kernel: Kernel, parent: Path) -> Path:
    """A hard-linked copy of the unpacked package with kmod indexes; returns its vmlinuz."""
    view = parent / "kernel"
    shutil.copytree(kernel.root, view, symlinks=True, copy_function=_link_or_copy)
    moddir = view / kernel.modules_dir.relative_to(kernel.root)
    for meta in moddir.glob("modules.*"):  # own copies, so depmod cannot touch the cache's
        meta.unlink()
        shutil.copy2(kernel.modules_dir / meta.name, meta)
    depmod = shutil.which("depmod", path=search_path()) or "depmod"
    run([depmod, "-a", "-b", str(view), kernel.release], "kmod depmod for vng", 300)
    return view / kernel.vmlinuz.relative_to(kernel.root)


def vng_argv(venv: Path, vmlinuz: Path) -> list[str]:
    return [
        str(venv / "bin" / "vng"),
        "--run",
        str(vmlinuz),
        "--disable-kvm",
        "--disable-microvm",
        "--force-9p",
        "--cpus",
        str(VCPUS),
        "--memory",
        MEMORY,
        "--exec",
        "true",
    ]


def vng_run(argv: list[str], env: dict[str, str], cwd: Path, timeout: float) -> dict[str, float]:
    """Wall time of one whole vng command; its process group is gone when this returns."""
    log = cwd / "vng.log"
    with log.open("wb") as out:
        start = time.monotonic()
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=cwd,
            start_new_session=True,
        )
        try:
            returncode = proc.wait(timeout)
            wall = time.monotonic() - start
        except BaseException as exc:  # a timeout, Ctrl-C: nothing of it is left running
            kill_group(proc.pid)
            proc.wait()
            if isinstance(exc, subprocess.TimeoutExpired):
                raise BenchError(f"vng did not finish within {timeout:g} s") from None
            raise
        kill_group(proc.pid)  # anything left in its group (normally nothing)
    if returncode != 0:
        tail = "\n  ".join(log.read_text(errors="replace").splitlines()[-15:])
        raise BenchError(f"vng exited {returncode}: {shlex.join(argv)}\n  {tail}")
    return {"wall": wall}


# -- report -----------------------------------------------------------------------------------


def qemu_version(binary: str) -> str:
    out = run([binary, "--version"], "qemu --version", 30)
    return out.splitlines()[0].removeprefix("QEMU emulator version ").strip()


def kvmlab_revision() -> str:
    """The repo's commit, ``+dirty`` when the work tree differs from it."""
    root = str(Path(__file__).resolve().parent.parent)
    try:
        head = run(["git", "-C", root, "rev-parse", "--short", "HEAD"], "git", 30).strip()
        dirty = run(["git", "-C", root, "status", "--porcelain", "--", "src"], "git", 30)
    except BenchError:
        return "unknown"
    return head + ("+dirty" if dirty.strip() else "")


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def cpu_seconds() -> tuple[float, float]:
    """(busy CPU seconds of the whole host, CPU seconds of this process and its reaped
    descendants); during a run, the first's growth less the second's is what other
    processes took from the 2 cores."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    busy = sum(fields[:3]) + sum(fields[5:8])  # user nice system, irq softirq steal
    own = sum(
        r.ru_utime + r.ru_stime
        for r in (
            resource.getrusage(resource.RUSAGE_SELF),
            resource.getrusage(resource.RUSAGE_CHILDREN),
        )
    )
    return busy / os.sysconf("SC_CLK_TCK"), own


def other_qemus() -> int:
    """QEMU processes running besides ours: they share the 2 cores and skew the numbers."""
    return len(processes_mentioning(["qemu-system-"]))


def table(kvmlab: Series, vng: Series | None, runs: int) -> list[str]:
    """One row per measure; the command is shown on each tool's main row."""
    rows = [
        ("kvmlab", label, key, kvmlab.command if key == "ready" else "")
        for key, label in KVMLAB_MEASURES.items()
        if key in kvmlab.samples
    ]
    summaries = {"kvmlab": kvmlab.summary()}
    if vng is not None:
        rows.append(("vng", "wall (whole command)", "wall", vng.command))
        summaries["vng"] = vng.summary()
    lines = [
        f"{'tool':7} {'measure':22} {'runs':>4} {'min (s)':>8} {'median (s)':>10} "
        f"{'max (s)':>8}  command"
    ]
    for tool, label, key, command in rows:
        s = summaries[tool][key]
        lines.append(
            f"{tool:7} {label:22} {runs:>4} {s['min']:8.2f} {s['median']:10.2f} "
            f"{s['max']:8.2f}  {command}"
        )
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=5, help="recorded runs per tool (5)")
    parser.add_argument("--warmup", type=int, default=1, help="unrecorded rounds first (1)")
    parser.add_argument("--json", type=Path, help="also write the numbers to this file")
    parser.add_argument("--timeout", type=float, default=300.0, help="per vng boot, s (300)")
    parser.add_argument(
        "--quiet",
        type=float,
        default=0.1,
        help="a run is quiet when other processes took less than this share of the CPU (0.1)",
    )
    parser.add_argument("--vng-version", default=VNG_VERSION, help=f"({VNG_VERSION})")
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="one kvmlab boot and nothing else (no virtme-ng): checks that this still runs",
    )
    args = parser.parse_args()
    if args.runs < 1 or args.warmup < 0:
        parser.error("--runs must be >= 1 and --warmup >= 0")

    work = Path(tempfile.mkdtemp(prefix="kvmlab-boot-"))  # short: sockets live below
    default_cache_dir().mkdir(parents=True, exist_ok=True)
    view_parent = Path(tempfile.mkdtemp(prefix=".bench-boot-", dir=default_cache_dir()))
    os.environ["KVMLAB_RUN_DIR"] = str(work / "run")
    markers = [str(work), str(view_parent)]
    try:
        with sigterm_as_interrupt():
            return smoke(work) if args.smoke else measure(args, work, view_parent)
    except BenchError as exc:
        print(f"boot.py: {exc}", file=sys.stderr)
        return 1
    except KvmlabError as exc:
        print("\n".join(f"boot.py: kvmlab: {line}" for line in exc.lines()), file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("boot.py: interrupted; stopped what it had started", file=sys.stderr)
        return 130
    finally:
        leftover = processes_mentioning(markers)
        for pid in leftover:
            print(f"boot.py: killing leftover process {pid}", file=sys.stderr)
            kill_group(pid)  # a session leader (QEMU, vng): its group
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(view_parent, ignore_errors=True)


def kvmlab_series(lab: Kvmlab) -> Series:
    what = f"started(lab: vcpus={VCPUS}, memory={MEMORY}, accel=tcg) + .exec(['true'])"
    return Series("kvmlab", what, lab.config.argv)


def qemu_of(argv: list[str]) -> str:
    """The QEMU binary in a guest's argv (which may run it through a host-view wrapper)."""
    return next(a for a in argv if Path(a).name.startswith("qemu-system-"))


def smoke(work: Path) -> int:
    """One kvmlab boot, timed and shown as the full run shows it."""
    print("preparing: default image", file=sys.stderr)
    lab = kvmlab_setup(work)
    series = kvmlab_series(lab)
    result = kvmlab_run(lab)
    series.add({**result, "others_cpu_share": 0.0})
    print(
        f"boot to a usable command, 1 kvmlab run (smoke: no virtme-ng), seconds; "
        f"{qemu_of(lab.config.argv)}"
    )
    print("\n".join(table(series, None, 1)))
    return 0


def measure(args: argparse.Namespace, work: Path, view_parent: Path) -> int:
    print("preparing: default image, kernel package, virtme-ng venv", file=sys.stderr)
    lab = kvmlab_setup(work)
    config, image, kernel = lab.config, lab.image, kernel_package(lab.image)
    check_vng_host()
    venv = default_cache_dir() / "bench-venvs" / "virtme-ng"
    ensure_vng(venv, args.vng_version)
    vmlinuz = modules_view(kernel, view_parent)
    env = vng_env(venv)
    vng_cwd = work / "vng"
    vng_cwd.mkdir()
    qemu = qemu_of(config.argv)
    vng_qemu = shutil.which("qemu-system-x86_64", path=env["PATH"])
    if vng_qemu is None or Path(vng_qemu).resolve() != Path(qemu).resolve():
        raise BenchError(f"vng would run {vng_qemu}, kvmlab runs {qemu}")

    kvmlab = kvmlab_series(lab)
    shown = vng_argv(venv, kernel.vmlinuz)  # the cache's path: the view's file is the same
    vng = Series("vng", shlex.join(["vng", *shown[1:]]), vng_argv(venv, vmlinuz))
    load_before, others_before = loadavg(), other_qemus()
    if others_before:
        print(
            f"warning: {others_before} other QEMU processes run; times will be noisy",
            file=sys.stderr,
        )
    contention: list[dict[str, object]] = []  # what else ran as each recorded run started
    others_seen = [others_before]
    total = args.warmup + args.runs
    for i in range(total):
        recorded = i >= args.warmup
        tag = f"run {i - args.warmup + 1}/{args.runs}" if recorded else f"warm-up {i + 1}"
        order = ("kvmlab", "vng") if i % 2 == 0 else ("vng", "kvmlab")
        for tool in order:
            if recorded:
                others_seen.append(other_qemus())
                contention.append(
                    {
                        "round": i - args.warmup + 1,
                        "tool": tool,
                        "loadavg": loadavg(),
                        "other_qemus": others_seen[-1],
                    }
                )
            busy0, own0 = cpu_seconds()
            start = time.monotonic()
            if tool == "kvmlab":
                result = kvmlab_run(lab)
                seconds = result["ready"]
            else:
                result = vng_run(vng.argv, env, vng_cwd, args.timeout)
                seconds = result["wall"]
            busy1, own1 = cpu_seconds()
            cores = os.cpu_count() or 1
            others = max(0.0, (busy1 - busy0) - (own1 - own0))
            result["others_cpu_share"] = others / ((time.monotonic() - start) * cores)
            print(
                f"  {tag} {tool:6} {seconds:6.2f} s  (other processes took "
                f"{result['others_cpu_share']:.0%} of the host's CPU meanwhile)",
                file=sys.stderr,
            )
            if recorded:
                (kvmlab if tool == "kvmlab" else vng).add(result)

    ratio = kvmlab.summary()["ready"]["median"] / vng.summary()["wall"]["median"]
    quiet_k, quiet_v = kvmlab.quiet("ready", args.quiet), vng.quiet("wall", args.quiet)
    quiet_ratio = (
        statistics.median(quiet_k) / statistics.median(quiet_v) if quiet_k and quiet_v else None
    )
    configuration = {
        "kernel_release": image.kernel_release,
        "kernel_package": image.kernel_package,
        "accelerator": "tcg (multi-threaded TCG, -cpu max, q35; kvmlab passes "
        "-accel tcg,thread=multi, vng --disable-kvm gets QEMU's default, also MTTCG)",
        "vcpus": VCPUS,
        "memory": MEMORY,
        "qemu": qemu_version(qemu),
        "kvmlab": f"{kvmlab_version} ({kvmlab_revision()})",
        "virtme_ng": args.vng_version,
        "kvmlab_image": f"{image.key} ({'vmlinux via PVH' if image.pvh else 'bzImage'})",
        "vng_kernel": str(kernel.vmlinuz),
        "runs": args.runs,
        "warmup_rounds": args.warmup,
        "order": "interleaved, alternating which tool goes first",
        "loadavg_before": load_before,
        "loadavg_after": loadavg(),
        "other_qemus_before": others_before,
        "other_qemus_max": max(others_seen),
    }
    print()
    print(f"boot to a usable command, {args.runs} runs each (+{args.warmup} warm-up), seconds")
    for key, value in configuration.items():
        if key not in ("runs", "warmup_rounds", "order"):
            print(f"  {key:18} {value}")
    print()
    print("\n".join(table(kvmlab, vng, args.runs)))
    print()
    shares = {s.tool: s.summary()["others_cpu_share"] for s in (kvmlab, vng)}
    print(
        "CPU taken by other processes during the runs (share of the host's "
        f"{os.cpu_count()} CPUs), median (max): "
        + ", ".join(f"{t} {v['median']:.0%} ({v['max']:.0%})" for t, v in shares.items())
    )
    print(f"ratio kvmlab median / vng median = {ratio:.3f}  (target <= 0.5, aim 0.3)")
    if quiet_ratio is None:
        print(f"no quiet runs (others under {args.quiet:.0%}) of both tools to compare")
    else:
        print(
            f"quiet runs only (others under {args.quiet:.0%}): kvmlab median "
            f"{statistics.median(quiet_k):.2f} s of {len(quiet_k)}, vng median "
            f"{statistics.median(quiet_v):.2f} s of {len(quiet_v)}, ratio {quiet_ratio:.3f}"
        )
    if args.json:
        data = {
            "configuration": configuration,
            "unit": "s",
            "contention_at_each_start": contention,
            "ratio_kvmlab_median_over_vng_median": ratio,
            "quiet_runs": {
                "others_cpu_share_below": args.quiet,
                "kvmlab_ready": quiet_k,
                "vng_wall": quiet_v,
                "ratio_of_medians": quiet_ratio,
            },
            "tools": {
                s.tool: {
                    "command": s.command,
                    "argv": s.argv,
                    "summary": s.summary(),
                    "runs": s.samples,
                }
                for s in (kvmlab, vng)
            },
        }
        args.json.write_text(json.dumps(data, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
