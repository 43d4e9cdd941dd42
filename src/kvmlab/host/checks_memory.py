"""Memory checks: 2M and 1G hugepages reserved, free, and mounted as hugetlbfs."""

from __future__ import annotations

from kvmlab.host import facts
from kvmlab.host.findings import Finding, Status, finding
from kvmlab.host.probe import HostProbe

HUGEPAGES_DIR = "/sys/kernel/mm/hugepages"
GIB_KB = 1024 * 1024
GRUB_HINT = "# kernel cmdline: add to GRUB_CMDLINE_LINUX in /etc/default/grub, update-grub, reboot"


def _size_kb(text: str) -> int | None:
    """hugetlbfs ``pagesize=`` option (``2M``, ``1G``, ``2048k``) in kB."""
    units = {"K": 1, "M": 1024, "G": GIB_KB}
    text = text.strip().upper().removesuffix("B")
    if text[-1:] in units and text[:-1].isdigit():
        return int(text[:-1]) * units[text[-1]]
    return int(text) // 1024 if text.isdigit() else None


def hugetlbfs_mounts(probe: HostProbe) -> dict[int, list[str]]:
    """Mount points of hugetlbfs by page size in kB (no ``pagesize=``: the default size)."""
    default_kb = facts.meminfo_kb(probe).get("Hugepagesize", 2048)
    found: dict[int, list[str]] = {}
    for m in facts.mounts(probe):
        if m.fstype == "hugetlbfs":
            size = _size_kb(m.option("pagesize") or "") or default_kb
            found.setdefault(size, []).append(m.target)
    return found


def suggested_pages(probe: HostProbe, size_kb: int) -> int:
    """How many pages to suggest: 2 GiB worth, at most a quarter of RAM (0: too little RAM)."""
    total_kb = facts.meminfo_kb(probe).get("MemTotal", 8 * GIB_KB)
    budget_kb = min(2 * GIB_KB, total_kb // 4)
    return budget_kb // size_kb


def check_hugepages(probe: HostProbe, size_kb: int) -> Finding:
    """Reserved and free hugepages of one size and whether a hugetlbfs of that size is mounted."""
    label = "1G" if size_kb == GIB_KB else f"{size_kb // 1024}M"
    check_id = f"mem.hugepages_{label.lower()}"
    base = f"{HUGEPAGES_DIR}/hugepages-{size_kb}kB"
    nr_text = probe.read_value(f"{base}/nr_hugepages")
    free_text = probe.read_value(f"{base}/free_hugepages")
    if nr_text is None or not nr_text.isdigit():
        why = "" if label != "1G" else " (the CPU needs pdpe1gb)"
        return finding(
            check_id, Status.SKIP, f"no {label} hugepage support{why}", [(base, "missing")]
        )
    nr = int(nr_text)
    free = int(free_text) if free_text and free_text.isdigit() else 0
    mounted = hugetlbfs_mounts(probe).get(size_kb, [])
    evidence = [
        (f"{base}/nr_hugepages", nr_text),
        (f"{base}/free_hugepages", free_text or "missing"),
        (
            facts.MOUNTS,
            f"hugetlbfs pagesize={label} on {', '.join(mounted)}"
            if mounted
            else f"no hugetlbfs with pagesize={label}",
        ),
    ]
    taken = {t for targets in hugetlbfs_mounts(probe).values() for t in targets}
    mount_dir = "/dev/hugepages" if label == "2M" else f"/dev/hugepages{label}"
    mount_dir = mount_dir if mount_dir not in taken else f"/dev/hugepages{label}"
    mount_fix = f"mkdir -p {mount_dir} && mount -t hugetlbfs -o pagesize={label} none {mount_dir}"
    if nr == 0:
        count = suggested_pages(probe, size_kb)
        if count == 0:
            return finding(
                check_id, Status.INFO, f"no {label} hugepages (too little RAM)", evidence
            )
        fix = [f"echo {count} > {base}/nr_hugepages"]
        if label == "1G":
            fix[0] += "   # may reserve fewer once memory is fragmented"
            fix.append(f"default_hugepagesz=1G hugepagesz=1G hugepages={count}   {GRUB_HINT}")
        if not mounted:
            fix.append(mount_fix)
        return finding(
            check_id,
            Status.INFO,
            f"no {label} hugepages reserved (vhost-user and DPDK labs need them)",
            evidence,
            fix,
        )
    if not mounted:
        return finding(
            check_id,
            Status.WARN,
            f"{nr} {label} hugepages reserved but no hugetlbfs of that size is mounted",
            evidence,
            [mount_fix],
        )
    if free == 0:
        return finding(
            check_id,
            Status.WARN,
            f"all {nr} {label} hugepages are in use",
            evidence,
            [f"echo {nr * 2} > {base}/nr_hugepages"],
        )
    return finding(
        check_id,
        Status.OK,
        f"{free} of {nr} {label} hugepages free, hugetlbfs on {mounted[0]}",
        evidence,
    )


def check_hugepages_2m(probe: HostProbe) -> Finding:
    """2 MiB hugepages."""
    return check_hugepages(probe, 2048)


def check_hugepages_1g(probe: HostProbe) -> Finding:
    """1 GiB hugepages (DPDK vhost-user labs use these)."""
    return check_hugepages(probe, GIB_KB)
