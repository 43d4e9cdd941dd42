"""The default guest's initramfs: busybox-static, a few kernel modules and ``init.sh``.

The guest boots from this initramfs, mounts the host's root read-only, puts a tmpfs
overlay on it and chroots there to run the host's own qemu-ga, so every host tool (fio,
iperf3, sysbench, qemu) is in the guest without building a root filesystem.

How the host root is shared was chosen by measurement (``python -m
tests.guest.measure_share``: Debian 12 host, 2 cores, QEMU 7.2, TCG ``-cpu max -smp 2 -m
1G``, Debian 6.1.0-56 kernels, 5 boots per variant interleaved, medians in seconds; stages
from the host clock and the guest's uptime markers):

    =====================  =====  ========  ======  ====  =====  ==========  ====  =====
    variant                ready  firmware  kernel  init  agent  sysbench    dd    python
                                  + load                         512M/1M     shm   imports
    =====================  =====  ========  ======  ====  =====  ==========  ====  =====
    9p, generic            2.99   0.22      1.90    0.70  0.17   4.11/1.85   2.34  2.34
    virtiofs, generic      2.93   0.21      1.83    0.69  0.17   3.06/1.84   2.35  1.94
    virtiofs, cloud        2.92   0.41      1.63    0.64  0.19   3.06/1.74   2.23  1.92
    9p, generic, memfd RAM 2.90   0.22      1.67    0.73  0.17   3.06/1.85   2.35  2.65
    =====================  =====  ========  ======  ====  =====  ==========  ====  =====

(sysbench memory with 512 MiB blocks x 2 GiB / 1 MiB blocks x 8 GiB; dd of 400 MiB to
/dev/shm; python3 importing 8 stdlib packages through the share. The 9p rows used
cache=loose; cache=mmap, used now, measured the same within noise: see init.sh.)

The generic kernel is booted as the ELF vmlinux through PVH: booted as its XZ bzImage,
firmware+load is 2.61 s and ready 5.22 s; that, not the share, was most of the 9p/virtio-fs
gap seen before.

Default: 9p with the generic kernel. Boot-to-agent is equal within noise, and the
memory-backend-memfd,share=on RAM that virtio-fs needs did not slow memory-heavy work here
(the ~3x of earlier notes did not reproduce). virtio-fs reads small files ~20% faster. What
decides is safety and simplicity: QEMU 7.2's C virtiofsd has no read-only mode, and a guest
root that remounts the share read-write writes the host's root filesystem (checked), while
9p's ``readonly=on`` is enforced by QEMU; 9p also needs no daemon per guest and no shared
memory backend. virtio-fs stays available: ``build_image("virtiofs")``.

Stage markers: ``init.sh`` prints ``kvmlab: EVENT t=UPTIME`` lines on the serial console
(``t`` is the guest's /proc/uptime, i.e. seconds since the kernel started);
:func:`parse_markers` reads them back.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from kvmlab.guest import elf
from kvmlab.guest.cpio import CpioWriter
from kvmlab.guest.errors import ImageError
from kvmlab.guest.standalone import ToolFile

# Which modules init.sh loads, by group (see its `load` calls); dependencies are added.
MODULE_GROUPS: Mapping[str, tuple[str, ...]] = {
    "base": ("virtio_pci", "virtio_console", "overlay"),
    "9p": ("9pnet_virtio", "9p"),
    "virtiofs": ("virtiofs",),
    "net": ("virtio_net",),
    "blk": ("virtio_blk", "crc32c_generic", "ext4"),  # ext4 (+ its checksum): Disk.mount
    "scsi": ("virtio_scsi", "sd_mod", "crc32c_generic", "ext4"),  # bus = "virtio-scsi" disks
    "vsock": ("vmw_vsock_virtio_transport",),
    "kvm_amd": ("kvm_amd",),
    "kvm_intel": ("kvm_intel",),
    "vhost": ("vhost_net", "tun"),
    "dpdk": ("uio_pci_generic", "vfio_pci"),  # loaded by kvmlab for PVP, not at boot
    "e1000e": ("e1000e",),  # the emulated Intel NIC (model = "e1000e"), a PCI device
}
OPTIONAL_GROUPS = frozenset({"e1000e", "scsi"})
"""Groups an image carries when its kernel has their modules (the cloud flavour has no
e1000e): a guest with such a device then boots with it unconfigured, and init says so."""
SHARE_GROUPS = ("9p", "virtiofs")
MODULE_PARAMS: Mapping[str, str] = {"kvm_amd": "nested=1", "kvm_intel": "nested=1"}

# Console markers, in boot order.
INIT_START = "init start"
MODULES_LOADED = "modules loaded"
ROOT_MOUNTED = "root mounted"
AGENT_STARTED = "agent started"
INIT_FAILED = "init failed"  # preceded by a line ERROR_PREFIX + reason
ERROR_PREFIX = "kvmlab: error: "
MARKER_RE = re.compile(r"^kvmlab: (?P<event>.+?) t=(?P<t>\d+(?:\.\d+)?)\s*$", re.MULTILINE)

_MODULE_SUFFIXES = (".ko.xz", ".ko.zst", ".ko.gz", ".ko")


@dataclass(frozen=True)
class ModuleInfo:
    """One modules.dep line: the module's path and its dependencies' paths."""

    path: str
    deps: tuple[str, ...]


def module_name(path: str) -> str:
    """``kernel/arch/x86/kvm/kvm-amd.ko`` -> ``kvm_amd`` (the name in /sys/module)."""
    base = path.rsplit("/", 1)[-1]
    for suffix in _MODULE_SUFFIXES:
        if base.endswith(suffix):
            base = base.removesuffix(suffix)
            break
    return base.replace("-", "_")


def parse_modules_dep(text: str) -> dict[str, ModuleInfo]:
    """Parse ``modules.dep`` into {module name: ModuleInfo}."""
    modules: dict[str, ModuleInfo] = {}
    for line in text.splitlines():
        path, sep, deps = line.partition(":")
        if not sep:
            continue
        modules[module_name(path.strip())] = ModuleInfo(path.strip(), tuple(deps.split()))
    return modules


def load_order(modules: Mapping[str, ModuleInfo], names: Iterable[str]) -> list[ModuleInfo]:
    """The named modules and everything they need, each once, dependencies first.

    modules.dep lists (transitive) dependencies but in no guaranteed order, so each
    dependency's own line is followed too (a depth-first post-order walk).
    """
    order: list[ModuleInfo] = []
    done: set[str] = set()
    active: list[str] = []

    def visit(name: str, wanted_by: str | None) -> None:
        if name in done:
            return
        if name in active:
            raise ImageError(f"module dependency cycle: {' -> '.join([*active, name])}")
        info = modules.get(name)
        if info is None:
            why = f" (needed by {wanted_by})" if wanted_by else ""
            raise ImageError(f"kernel module {name}{why} is not in modules.dep")
        active.append(name)
        for dep in info.deps:
            visit(module_name(dep), name)
        active.pop()
        done.add(name)
        order.append(info)

    for name in names:
        visit(name.replace("-", "_"), None)
    return order


def shipped_modules(
    modules: Mapping[str, ModuleInfo], groups: Iterable[str]
) -> list[tuple[str, ModuleInfo]]:
    """Each group's modules in load order, dependencies included, as ``(group, module)``;
    an optional group whose kernel lacks a module is left out."""
    out: list[tuple[str, ModuleInfo]] = []
    for group in groups:
        if group in OPTIONAL_GROUPS and any(
            m.replace("-", "_") not in modules for m in MODULE_GROUPS[group]
        ):
            continue
        out.extend((group, info) for info in load_order(modules, MODULE_GROUPS[group]))
    return out


def module_table(modules: Mapping[str, ModuleInfo], groups: Iterable[str]) -> str:
    """``/etc/kvmlab/modules`` for init.sh: ``GROUP NAME`` in load order, dependencies
    included (init modprobes a group's NAMEs not loaded yet; modprobe finds each file in
    modules.dep and its options in ``/etc/modprobe.d/kvmlab.conf``)."""
    shipped = shipped_modules(modules, groups)
    return "".join(f"{group} {module_name(info.path)}\n" for group, info in shipped)


def modprobe_options() -> str:
    """``/etc/modprobe.d/kvmlab.conf``: the options init's modprobe gives a module (the kernel
    command line's ``MODULE.PARAM=VALUE`` words follow them, so they win)."""
    return "".join(f"options {name} {params}\n" for name, params in MODULE_PARAMS.items())


def groups_for(share: str) -> list[str]:
    """The module groups an image sharing the host root over ``share`` carries (``none``:
    a self-contained image, no share module)."""
    if share == "none":
        return [g for g in MODULE_GROUPS if g not in SHARE_GROUPS]
    if share not in SHARE_GROUPS:
        raise ImageError(f"unknown share kind {share!r} (known: {', '.join(SHARE_GROUPS)})")
    return [g for g in MODULE_GROUPS if g not in SHARE_GROUPS or g == share]


def init_script() -> str:
    """The text of init.sh as shipped in this package."""
    return resources.files("kvmlab.guest").joinpath("init.sh").read_text()


def parse_markers(console: str) -> dict[str, float]:
    """{event: guest uptime} from a serial console log (first occurrence of each event)."""
    found: dict[str, float] = {}
    for match in MARKER_RE.finditer(console.replace("\r", "")):
        found.setdefault(match.group("event"), float(match.group("t")))
    return found


def check_static(binary: Path) -> None:
    """Refuse a dynamically linked busybox: the initramfs has no libc to run it."""
    data = binary.read_bytes()
    if not elf.is_elf64(data):
        raise ImageError(f"{binary} is not a 64-bit little-endian ELF executable")
    if elf.needs_interpreter(data):
        raise ImageError(
            f"{binary} is dynamically linked; install busybox-static instead of busybox"
        )


def build_initramfs(
    out: Path,
    *,
    busybox: Path,
    modules_dir: Path,
    release: str,
    groups: Iterable[str],
    init: str,
    extra: Iterable[ToolFile] = (),
) -> None:
    """Write an uncompressed newc initramfs to ``out`` (deterministic for equal inputs);
    ``extra`` files are added with their parent directories. Uncompressed: the guest kernel
    copies it instead of inflating it, 0.5 s less in an L2 guest under KVM in a TCG L1."""
    check_static(busybox)
    modules = parse_modules_dep((modules_dir / "modules.dep").read_text())
    groups = list(groups)
    table = module_table(modules, groups)
    needed = {info.path for _, info in shipped_modules(modules, groups)}
    raw = io.BytesIO()
    cpio = CpioWriter(raw)
    for d in (
        "bin",
        "dev",
        "etc",
        "etc/kvmlab",
        "etc/modprobe.d",
        "lib",
        "lib/modules",
        "mnt",
        "newroot",
        "proc",
        "root",
        "sys",
        "tmp",
    ):
        cpio.add_dir(d)
    cpio.add_chardev("dev/console", 5, 1)
    cpio.add_file("init", init.encode(), 0o755)
    cpio.add_file("bin/busybox", busybox.read_bytes(), 0o755)
    cpio.add_file("etc/kvmlab/modules", table.encode())
    cpio.add_file("etc/modprobe.d/kvmlab.conf", modprobe_options().encode())
    mod_root = f"lib/modules/{release}"
    made = {mod_root}
    cpio.add_dir(mod_root)
    for path in sorted(needed):
        parts = path.split("/")
        for i in range(1, len(parts)):
            parent = "/".join([mod_root, *parts[:i]])
            if parent not in made:
                made.add(parent)
                cpio.add_dir(parent)
        cpio.add_file(f"{mod_root}/{path}", (modules_dir / path).read_bytes())
    # A modules.dep limited to what is shipped, for busybox modprobe in the guest.
    dep_lines = [
        f"{info.path}: {' '.join(info.deps)}".rstrip() + "\n"
        for info in modules.values()
        if info.path in needed
    ]
    cpio.add_file(f"{mod_root}/modules.dep", "".join(sorted(dep_lines)).encode())
    for tool in extra:
        parts = tool.path.split("/")
        for i in range(1, len(parts)):
            parent = "/".join(parts[:i])
            if parent not in made and parent not in ("bin", "lib", "etc"):
                made.add(parent)
                cpio.add_dir(parent)
        cpio.add_file(tool.path, tool.data, tool.mode)
    builtin = modules_dir / "modules.builtin"
    if builtin.is_file():
        cpio.add_file(f"{mod_root}/modules.builtin", builtin.read_bytes())
    cpio.close()
    out.write_bytes(raw.getvalue())
