"""What a lab needs of the host, in a user's words (``kvmlab labs``): derived from the lab
itself, so the list cannot drift from what ``up`` and ``run`` will ask for."""

from __future__ import annotations

from collections.abc import Sequence

from kvmlab.spec.lab import Guest, Lab


def lab_needs(labs: Sequence[Lab]) -> list[str]:
    """Short phrases for a lab and its variants (the lab as written first), most
    demanding first: hardware KVM, nested KVM, huge pages, a DPDK switch, network
    namespaces, a libvirtd, host CPUs to pin, an image of the user's."""
    out: list[str] = []
    if any(v.host_kvm is not None for v in labs[1:]):
        out.append("hardware KVM for some variants")
    lab = labs[0]
    guests = [pg for v in labs for pg in v.walk()]
    if lab.host_kvm is not None:
        out.insert(0, "hardware KVM")
    if any(len(path) > 1 for path, _ in guests):
        out.append("nested KVM (or TCG)")
    if any(g.memory.backing == "hugepages" for _, g in guests):
        out.append(f"huge pages ({_page_sizes([g for _, g in guests])})")
    if lab.switch is not None:  # (variants keep the lab's switch and backend)
        out.append("DPDK (testpmd)" if lab.switch.kind == "testpmd" else "OVS-DPDK")
    if lab.networks or any(n.type in ("tap", "vhost-net") for _, g in guests for n in g.nics):
        out.append("network namespaces and taps")
    if lab.backend == "libvirt":
        out.append("a libvirtd")
    pinned = sorted({c for _, g in guests for cpus in g.pinning.vcpus.values() for c in cpus})
    if pinned:
        out.append(f"host CPUs {_cpus(pinned)}")
    if any(g.boot == "disk" for _, g in guests):
        out.append("a disk image of yours")
    return out or ["nothing special"]


def _page_sizes(guests: Sequence[Guest]) -> str:
    sizes = {g.memory.hugepage_size for g in guests if g.memory.backing == "hugepages"}
    return ", ".join(sorted(sizes))


def _cpus(cpus: list[int]) -> str:
    return ",".join(str(c) for c in cpus)
