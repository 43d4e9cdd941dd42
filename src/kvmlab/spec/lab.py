"""A lab: named guests, some of them guest hypervisors with guests of their own."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    Field,
    StringConstraints,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from kvmlab.spec.backend import Backend, LibvirtSpec, check_uri
from kvmlab.spec.base import SpecModel
from kvmlab.spec.bench import BenchSpec
from kvmlab.spec.devices import CloudInit, Disk, Nic, UserNic
from kvmlab.spec.guest_kvm import GuestKvm
from kvmlab.spec.machine import MAX_VCPUS, Clock, Cpu, HyperV, Memory, Pinning
from kvmlab.spec.migration import MigrationSpec
from kvmlab.spec.network import NetworkSpec
from kvmlab.spec.switch import SwitchSpec, TuningSpec
from kvmlab.spec.units import (
    NAME_PATTERN,
    BackgroundCommand,
    CommandLine,
    PathText,
    path_text,
    quoted,
)

Name = Annotated[str, StringConstraints(pattern=NAME_PATTERN)]


def _host_path(value: str) -> str:
    parts = path_text(value).split("/")
    if not value.startswith("/"):
        raise ValueError(f"{quoted(value)} is not an absolute path")
    if value != "/" and any(p in ("", ".", "..") for p in parts[1:]):
        raise ValueError(
            f"{quoted(value)} is not a normalised path (no '.', '..', '//' or trailing /)"
        )
    return value


HostPath = Annotated[str, AfterValidator(_host_path)]


class HostView(SpecModel):
    """What of the host's root a default-image guest reads through its share."""

    hide: list[HostPath] = []
    """More host paths (files or directories, absolute) to hide from the guest."""

    show: list[HostPath] = []
    """Default masks to lift: those at or below these paths, e.g. `["/root/.ssh"]`; `["/"]`
    lifts them all (the whole host root is shared, as before kvmlab masked it). `hide`
    entries always apply."""


def deep_merge(base: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """``base`` with ``overrides`` laid over it, tables merged key by key."""
    out = dict(base)
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = value
    return out


class Guest(SpecModel):
    """A virtual machine. With `nested = true` it is a guest hypervisor that may hold guests."""

    machine: Literal["q35", "pc", "microvm"] = "q35"
    """QEMU machine type: `q35` (PCIe), `pc` (i440fx) or `microvm` (QEMU only, direct boot)."""

    accel: Literal["auto", "kvm", "tcg"] = "auto"
    """Accelerator; `auto` uses KVM where it is usable for a stock kernel, TCG otherwise."""

    vcpus: int = Field(default=1, ge=1, le=MAX_VCPUS)
    """Number of vCPUs."""

    cpu: Cpu = Cpu()
    """CPU model, features and topology."""

    memory: Memory = Memory()
    """RAM size and backing; `memory = "2G"` is short for `memory.size = "2G"`."""

    pinning: Pinning = Pinning()
    """vCPU and emulator thread pinning."""

    clock: Clock = Clock()
    """Clock offset and timers."""

    hyperv: HyperV | None = None
    """Hyper-V enlightenments (Windows guests); unset means none."""

    disks: list[Disk] = []
    """Disks, in boot order."""

    nics: list[Nic] = Field(default=[], max_length=28)
    """Network interfaces (at most 28: PCI slots run out before)."""

    boot: Literal["image", "kernel", "disk"] = "image"
    """What the guest boots: `image`, kvmlab's embedded default guest (a Debian kernel and a
    small initramfs that mounts the host's root read-only with a tmpfs overlay and starts the
    guest agent: the host's tools, no disk image); `kernel`, the `kernel`/`initrd`/`append`
    given here (the default when `kernel` is set); `disk`, the first disk."""

    kernel: PathText | None = None
    """Kernel image for `boot = "kernel"`; a relative path is relative to the lab file."""

    initrd: PathText | None = None
    """Initial ramdisk for `boot = "kernel"`."""

    append: CommandLine | None = None
    """Kernel command line for `boot = "kernel"`, or extra parameters for `boot = "image"`
    (there `MODULE.PARAM=VALUE` reaches the modules its init loads, e.g. `kvm_amd.npt=0`, and
    `kvmlab.cache=loose` keeps what it read of the host: tools start faster in a nested
    guest, but a host file changed after its boot may read stale)."""

    host_view: HostView = HostView()
    """With `boot = "image"`: what of the host root the guest can read. Hidden by default: the
    host's live state (/proc, /sys, /dev, /run, /tmp, /var/tmp), password hashes
    (/etc/shadow, ...), ssh host private keys, /etc/ssl/private and other system key
    directories, every home's keys and credentials (.ssh, .gnupg, .aws, .kube, .docker,
    .netrc, ...) and kvmlab's run root and results database; the image cache stays visible. A
    hidden directory looks empty and a hidden file empty, both read-only; paths missing on the
    host are skipped. Enforced on the host (QEMU exports a masked copy of /), so guest root
    cannot undo it."""

    qemu: HostPath | None = None
    """The QEMU binary for this guest (absolute path; default /usr/bin/qemu-system-x86_64),
    e.g. QEMU 10.0 from bookworm-backports unpacked beside Debian's 7.2 (`scripts/qemu10.sh`)
    to compare versions side by side."""

    migratable: bool = False
    """With `boot = "image"`: boot the self-contained image, which `kvmlab migrate` can
    live-migrate (a mounted 9p or virtio-fs share blocks migration). Its initramfs holds
    busybox, the guest agent and kvmlab's dirtying workload, not the host's tools (no fio,
    sysbench, iperf3 in it), and the guest gets a probe port that times its downtime."""

    cloud_init: CloudInit | None = None
    """With `boot = "disk"`: attach a NoCloud seed (user, ssh keys, guest agent) kvmlab writes."""

    background: list[BackgroundCommand] = Field(default=[], max_length=8)
    """Commands started in the guest once it is up and set up, each a line of shell words
    run without a shell, as root, left running for the guest's life (a load, or a device
    the guest drives, for `exits` to profile: `kvmlab-rtc --hz 1024` turns on the RTC's
    periodic interrupt, the cause of an RTC port exit storm). kvmlab's own guest programs
    (`kvmlab-*`) are found beside kvmlab itself, and `up` waits until they say they run
    (the ticks are on when a profile starts). One that exits at once stops `up` with what
    it printed; its output is in `/run/kvmlab-background-N.log` in the guest."""

    libvirt_uri: str | None = None
    """The libvirtd that runs this guest on the libvirt backend, when not the lab's (`[libvirt]
    uri` or `--connect`): one lab's guests on several hosts. Top-level guests only."""

    nested: bool = False
    """This guest is a guest hypervisor: virtualization is exposed to it and it may hold guests."""

    kvm: GuestKvm | None = None
    """The KVM inside this guest hypervisor (needs `nested = true`): module parameters set
    before its guests start and read back, e.g. `kvm = { nested_paging = false }`."""

    guests: dict[Name, Guest] = {}
    """Guests run inside this one (needs `nested = true`)."""

    when_tcg: dict[str, Any] = {}
    """Overrides of this guest's keys applied when it runs under TCG (no usable hardware
    KVM), e.g. `when_tcg = { vcpus = 1 }`: a guest hypervisor under TCG keeps its own guests
    alive under KVM only with one vCPU. Not `guests`, `accel` or `when_tcg` itself, and
    nothing that widens what the guest sees of the host (`host_view`, `boot`, `migratable`)
    or opens a forward beyond loopback: those are set on the guest itself. `kvmlab check`
    shows the guest as it runs on this host."""

    def under(self, accel: str) -> Guest:
        """This guest as it runs under ``accel`` (its ``when_tcg`` applied under TCG)."""
        if accel != "tcg" or not self.when_tcg:
            return self
        base = self.model_dump(exclude={"when_tcg", "guests"}, exclude_unset=True, by_alias=True)
        merged = Guest.model_validate(deep_merge(base, self.when_tcg))
        return merged.model_copy(update={"guests": self.guests})

    @model_validator(mode="after")
    def _when_tcg_is_a_guest(self) -> Guest:
        bad = sorted(set(self.when_tcg) & {"guests", "accel", "when_tcg", "nested"})
        if bad:
            raise ValueError(f"when_tcg cannot change {', '.join(bad)}")
        if self.when_tcg:
            from kvmlab.spec.messages import explain

            base = self.model_dump(
                exclude={"when_tcg", "guests"}, exclude_unset=True, by_alias=True
            )
            try:
                merged = Guest.model_validate(deep_merge(base, self.when_tcg))
            except ValidationError as exc:
                raise _when_tcg_error(*explain(exc.errors()[0], Guest)) from None
            for where, message in _more_exposed(self, merged):
                raise _when_tcg_error(where, message)
        return self

    @model_validator(mode="after")
    def _kvm_needs_a_guest_hypervisor(self) -> Guest:
        if self.kvm is not None and not self.nested:
            raise PydanticCustomError(
                "kvm_not_nested", "kvm sets the KVM inside a guest hypervisor: add nested = true"
            )
        if self.kvm is not None and self.boot == "disk":
            raise PydanticCustomError(
                "kvm_needs_cmdline",
                "kvm goes on the guest's kernel command line, which a disk boot does not take "
                'from kvmlab: boot = "image" or "kernel"',
            )
        return self

    @field_validator("libvirt_uri")
    @classmethod
    def _uri(cls, value: str | None) -> str | None:
        return None if value is None else check_uri(value)

    @model_validator(mode="before")
    @classmethod
    def _kernel_means_kernel_boot(cls, data: Any) -> Any:
        if isinstance(data, dict) and "kernel" in data and "boot" not in data:
            return {**data, "boot": "kernel"}
        return data


def _when_tcg_error(where: str, message: str) -> PydanticCustomError:
    """A problem at ``when_tcg.WHERE``: the loader names that key (kvmlab.spec.messages)."""
    return PydanticCustomError(
        "when_tcg", "when_tcg.{where}: {message}", {"where": where, "message": message}
    )


_SEES = "when_tcg may not widen what a guest sees of the host"


def _more_exposed(written: Guest, merged: Guest) -> Iterator[tuple[str, str]]:
    """Where ``merged`` (the guest with its ``when_tcg``) exposes more of the host than the
    guest as ``written``: a share of the host root, paths its host view shows or no longer
    hides, forwards listening beyond loopback. Keys relative to the guest."""

    def shares(g: Guest) -> bool:
        return g.boot == "image" and not g.migratable

    if shares(merged) and not shares(written):
        key = "boot" if merged.boot != written.boot else "migratable"
        yield (
            key,
            (
                f"shares the host's root with the guest, which the guest as written does "
                f"not; {_SEES}: set {key} on the guest itself"
            ),
        )
    shown = written.host_view.show
    for path in merged.host_view.show:
        if not any(path == s or s == "/" or path.startswith(s + "/") for s in shown):
            yield (
                "host_view.show",
                (
                    f"{quoted(path)} shows the guest more of the host than "
                    f"as written; {_SEES}: set host_view on the guest "
                    "itself"
                ),
            )
    for path in written.host_view.hide:
        if path not in merged.host_view.hide:
            yield (
                "host_view.hide",
                (
                    f"drops {quoted(path)}, which the guest as written "
                    f"hides; {_SEES}: keep it in the list"
                ),
            )
    for key in ("kernel", "initrd", "qemu"):  # host files read into the guest, or run
        if getattr(merged, key) != getattr(written, key):
            yield (
                key,
                (
                    f"changes the host file the guest as written uses ("
                    f"{quoted(str(getattr(merged, key)))}); {_SEES}: set {key} on the "
                    "guest itself"
                ),
            )
    disks = {d.path: d for d in written.disks}
    for i, disk in enumerate(merged.disks):
        same = disks.get(disk.path)
        if same is None:
            yield (
                f"disks[{i}].path",
                (
                    f"{quoted(disk.path)} gives the guest a host file the "
                    f"guest as written does not have; {_SEES}: add the disk "
                    "on the guest itself"
                ),
            )
        elif same.readonly and not disk.readonly:
            yield (
                f"disks[{i}].readonly",
                (
                    f"makes {quoted(disk.path)} writable, which the "
                    f"guest as written reads only; {_SEES}: keep "
                    "readonly = true"
                ),
            )
    attached = [_attachment(n) for n in written.nics if not isinstance(n, UserNic)]
    for i, nic in enumerate(merged.nics):
        if not isinstance(nic, UserNic) and _attachment(nic) not in attached:
            yield (
                f"nics[{i}]",
                (
                    f"attaches the guest to the host ({nic.type} NIC) where the "
                    f"guest as written is not; {_SEES}: add the NIC on the "
                    "guest itself"
                ),
            )
    listening = {
        fwd
        for nic in written.nics
        if isinstance(nic, UserNic)
        for fwd in nic.forwards
        if not fwd.host_addr.is_loopback
    }
    for i, nic in enumerate(merged.nics):
        for j, fwd in enumerate(nic.forwards if isinstance(nic, UserNic) else ()):
            if not fwd.host_addr.is_loopback and fwd not in listening:
                yield (
                    f"nics[{i}].forwards[{j}].host_addr",
                    (
                        f"{fwd.host_addr} (port {fwd.host_port}/{fwd.proto}) listens beyond "
                        "loopback, which the guest as written does not; when_tcg may not open "
                        "ports to other hosts: forward it on the guest itself"
                    ),
                )


def _attachment(nic: Any) -> tuple[Any, ...]:
    """What of the host a NIC other than a user one attaches the guest to."""
    return tuple(getattr(nic, k, None) for k in ("type", "ifname", "network", "socket", "port"))


class Lab(SpecModel):
    """A lab file: a name and the guests it runs on this host."""

    name: Name
    """Lab name, used in addresses (`LAB/GUEST`) and run directories."""

    description: str = ""
    """What the lab is for."""

    guests: dict[Name, Guest] = Field(min_length=1)
    """Guests started on this host (level 1), keyed by name."""

    backend: Backend = "qemu"
    """Who runs the guests: `qemu` (kvmlab starts QEMU itself) or `libvirt` (a libvirtd,
    see `[libvirt]`); `--backend` overrides it."""

    libvirt: LibvirtSpec = LibvirtSpec()
    """The libvirtd of the `libvirt` backend."""

    bench: BenchSpec = BenchSpec()
    """Benchmark settings for `kvmlab bench` and `kvmlab run`."""

    switch: SwitchSpec | None = None
    """The userspace vswitch kvmlab starts before the guests and stops after them; guests'
    vhost-user NICs name its ports."""

    networks: dict[Name, NetworkSpec] = {}
    """Private networks (`[networks.NAME]`): a bridge per network in the lab's own network
    namespace; guests' `tap`/`vhost-net` NICs join one with `network = "NAME"`."""

    tuning: TuningSpec | None = None
    """Host tuning for the packet path (`kvmlab tune`, `[bench.pvp] compare_tuning`)."""

    host_kvm: GuestKvm | None = None
    """What this lab needs of the host's own KVM (L0's `kvm_intel`/`kvm_amd` parameters,
    the same keys as a guest hypervisor's `kvm`): checked before anything starts and never
    changed (kvmlab does not reload the host's modules). A variant asking for what the
    host does not have is not run by `kvmlab run`, which names it with the reason and the
    command that would give it (the nested-paging talk's rows with the host's EPT/NPT or
    VMCS shadowing off); `up` and `--variant` refuse it."""

    migrations: list[MigrationSpec] = []
    """Live migrations `kvmlab migrate --lab` runs side by side (`[[migrations]]`); `kvmlab
    run` runs them after the suite and stores them with the run."""

    variants: dict[Name, dict[str, Any]] = {}
    """Configurations `kvmlab run` compares side by side: each a table of overrides of this
    lab's keys, e.g. `[variants.named-cpu.guests.l1.cpu] model = "EPYC"`; each is validated
    as a whole lab. `default` names the lab as written, so no variant may take it."""

    @field_validator("variants")
    @classmethod
    def _not_as_written(cls, value: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        if "default" in value:
            raise ValueError(
                "'default' names the lab as written, measured beside every "
                "variant: give this variant another name"
            )
        return value

    def within(self, address: str) -> Lab:
        """The lab as the guest hypervisor at ``address`` sees it: its guests at the top."""
        parent = self.find(address)
        if parent is None or not parent.nested:
            raise KeyError(address)
        return self.model_copy(update={"guests": parent.guests})

    def walk(self) -> Iterator[tuple[tuple[str, ...], Guest]]:
        """Every guest with its path of names from the top (`("l1", "l2")`), parents first."""

        def visit(
            prefix: tuple[str, ...], guests: dict[str, Guest]
        ) -> Iterator[tuple[tuple[str, ...], Guest]]:
            for name, guest in guests.items():
                path = (*prefix, name)
                yield path, guest
                yield from visit(path, guest.guests)

        yield from visit((), self.guests)

    def find(self, address: str) -> Guest | None:
        """The guest at ``address`` (``"l1"`` or ``"l1/l2"``), or None."""
        for path, guest in self.walk():
            if "/".join(path) == address:
                return guest
        return None
