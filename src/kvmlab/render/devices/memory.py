"""Guest RAM: size, backend object, huge pages, NUMA cells."""

from __future__ import annotations

from dataclasses import dataclass

from kvmlab.render.argv import QemuArgs, opts
from kvmlab.render.xmldom import DomainXml, sub
from kvmlab.spec import Guest
from kvmlab.spec.machine import HUGEPAGE_BYTES, Memory
from kvmlab.spec.units import MIB, format_cpuset, format_size


@dataclass(frozen=True)
class RamLayout:
    """``-m`` with memory-backend objects (``-machine memory-backend`` or ``-numa``)."""

    guest: Guest
    virtiofs: bool = False
    """The guest mounts a virtio-fs share: all RAM must be a shared memfd."""

    @property
    def memory(self) -> Memory:
        """The memory spec, made shareable memfd when virtio-fs needs it."""
        mem = self.guest.memory
        if self.virtiofs and not mem.shared_anywhere:
            backing = "memfd" if mem.backing == "anonymous" else mem.backing
            return mem.model_copy(update={"backing": backing, "shared": True})
        return mem

    def _backend(self, obj_id: str, size: int, share: bool) -> str:
        mem = self.memory
        prealloc = True if mem.prealloc else None
        if mem.backing == "anonymous":
            return opts("memory-backend-ram", id=obj_id, size=format_size(size), prealloc=prealloc)
        hugetlb = mem.backing == "hugepages"
        return opts(
            "memory-backend-memfd",
            id=obj_id,
            size=format_size(size),
            hugetlb=True if hugetlb else None,
            hugetlbsize=mem.hugepage_size if hugetlb else None,
            share=share,
            prealloc=prealloc,
        )

    def qemu(self, q: QemuArgs) -> None:
        mem = self.memory
        if mem is not self.guest.memory:
            q.note("virtio-fs share: guest RAM is a shared memfd (vhost-user needs to map it)")
        q.add("-m", f"{mem.size // MIB}M")
        if mem.numa:
            for i, cell in enumerate(mem.numa):
                share = mem.shared or cell.mem_access == "shared"
                q.add("-object", self._backend(f"ram-node{i}", cell.memory, share))
                cpus = ",".join(f"cpus={part}" for part in format_cpuset(cell.cpus).split(","))
                q.add("-numa", f"node,nodeid={i},{cpus},memdev=ram-node{i}")
        elif mem.backing != "anonymous" or mem.prealloc:
            q.add("-object", self._backend("ram0", mem.size, mem.shared))
            q.machine_props["memory-backend"] = "ram0"
        if mem.backing == "hugepages":
            pages = mem.size // HUGEPAGE_BYTES[mem.hugepage_size]
            q.note(f"needs {pages} free {mem.hugepage_size} huge pages on the host")

    def xml(self, d: DomainXml) -> None:
        mem = self.memory
        kib = mem.size // 1024
        d.section("memory", unit="KiB").text = str(kib)
        d.section("currentMemory", unit="KiB").text = str(kib)
        if mem.backing != "anonymous" or mem.shared or mem.prealloc:
            backing = d.section("memoryBacking")
            if mem.backing == "hugepages":
                pages = sub(backing, "hugepages")
                sub(pages, "page", size=HUGEPAGE_BYTES[mem.hugepage_size] // 1024, unit="KiB")
            if mem.backing in ("memfd", "hugepages"):
                sub(backing, "source", type="memfd")
            if mem.shared:
                sub(backing, "access", mode="shared")
            if mem.prealloc:
                sub(backing, "allocation", mode="immediate")
        if mem.numa:
            numa = sub(d.section("cpu"), "numa")
            for i, cell in enumerate(mem.numa):
                sub(
                    numa,
                    "cell",
                    id=i,
                    cpus=format_cpuset(cell.cpus),
                    memory=cell.memory // 1024,
                    unit="KiB",
                    memAccess=cell.mem_access,
                )
