"""The guest's half of PVP, done through the guest agent: bind its two switch-port NICs to
``uio_pci_generic``, reserve huge pages, run testpmd in ``macswap`` between them (as the
vhost-user PVP write-up's guest does) and read its counters.

testpmd in the guest runs under a small helper (``guest_helper.py``, the guest's python3)
that answers requests through two FIFOs: a counter snapshot is one agent exec, whose
process starts cost most of the time under TCG.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path

from kvmlab.errors import RuntimeFailure
from kvmlab.net.testpmd_stats import Snapshot, add_fwd_stats, parse_port_stats
from kvmlab.net.traffic import Counted
from kvmlab.runtime.machine import Machine

WORK = "/run/kvmlab-pvp"
HUGEPAGES_2M = 128
"""256 MiB of the guest's RAM for DPDK (testpmd -m 128: its pool and rings)."""

BIND = r"""
set -e
busybox modprobe uio_pci_generic 2>/dev/null || modprobe uio_pci_generic
mkdir -p /dev/hugepages
grep -q " /dev/hugepages hugetlbfs" /proc/mounts || mount -t hugetlbfs nodev /dev/hugepages
echo "$1" > /proc/sys/vm/nr_hugepages
got=$(cat /proc/sys/vm/nr_hugepages)
[ "$got" -ge "$1" ] || { echo "only $got of $1 huge pages (2 MiB) could be reserved" >&2; exit 3; }
shift
for mac in "$@"; do
    bdf=
    for n in /sys/class/net/*; do
        [ "$(cat "$n/address")" = "$mac" ] || continue
        bdf=$(basename "$(dirname "$(readlink -f "$n/device")")")
    done
    [ -n "$bdf" ] || { echo "no NIC with MAC $mac" >&2; exit 4; }
    echo uio_pci_generic > "/sys/bus/pci/devices/$bdf/driver_override"
    echo "$bdf" > "/sys/bus/pci/devices/$bdf/driver/unbind"
    echo "$bdf" > /sys/bus/pci/drivers_probe
    [ "$(basename "$(readlink -f "/sys/bus/pci/devices/$bdf/driver")")" = uio_pci_generic ] \
        || { echo "$bdf did not bind to uio_pci_generic" >&2; exit 5; }
    echo "$bdf"
done
"""
"""Bind the NICs with these MACs to uio_pci_generic (in order); print their PCI addresses."""

GUEST_DRIVERS = ("net_virtio", "mempool_ring", "bus_pci", "bus_vdev")
"""The DPDK drivers testpmd in the guest uses: the virtio NICs, the default mempool and
the buses they sit on."""

TRIM = r"""
w=$1; drivers=$2; shift 2
# EAL dlopens every driver in DPDK's default directory: about 130 in Debian's build, with
# their libraries, 14 s under TCG against 0.3 s for these. In this mount namespace only,
# the directory shows the drivers named and those testpmd links against (the linker needs
# them); where that cannot be done (no such directory, no ldd, a mount refused) testpmd
# sees them all, as it would without kvmlab. Few forks: each costs a tenth of a second
# under TCG.
pmds=$(ls -d /usr/lib/*/dpdk/pmds-* 2>/dev/null | head -n 1)
if [ -n "$pmds" ] && linked=$(ldd "$(command -v dpdk-testpmd)") \
    && mkdir -p "$w/all" "$w/few" && mount --bind "$pmds" "$w/all"; then
    keep=" $drivers "
    for word in $linked; do
        case "$word" in librte_*.so*) stem=${word#librte_}; keep="$keep${stem%%.so*} " ;; esac
    done
    links=; kept=0; total=0
    for f in "$pmds"/librte_*; do  # names without blanks: librte_NAME.so[.ABI[.MINOR]]
        name=${f##*/}; stem=${name#librte_}; stem=${stem%%.so*}
        case "$name" in *.so) total=$((total + 1)) ;; esac
        case "$keep" in *" $stem "*)
            links="$links $w/all/$name"
            case "$name" in *.so) kept=$((kept + 1)) ;; esac ;;
        esac
    done
    if [ -n "$links" ] && ln -s $links "$w/few/" && mount --bind "$w/few" "$pmds"; then
        echo "DPDK drivers in testpmd's mount namespace: $kept of $total" >&2
    else
        echo "DPDK drivers: all $total (the trimmed directory could not be made)" >&2
    fi
else
    echo "DPDK drivers: as installed (no driver directory, ldd or bind mount here)" >&2
fi
exec python3 "$@"
"""
"""Run the helper with DPDK's driver directory trimmed to what testpmd in the guest needs."""

START = r"""
w=$1; drivers=$2; trim=$3; shift 3
rm -rf "$w"; mkdir -p "$w"
if unshare --mount --propagation private true 2>/dev/null; then  # a namespace for TRIM
    setsid unshare --mount --propagation private sh -c "$trim" trim "$w" "$drivers" "$@" \
        >"$w/helper.log" 2>&1 </dev/null &
else
    setsid python3 "$@" >"$w/helper.log" 2>&1 </dev/null &
fi
echo $! > "$w/helper.pid"
"""
"""Start the helper (and so testpmd) in a mount namespace of its own (:data:`TRIM`)."""

ASK = r"""
w=$1; req=$2
[ -e "$w/ready" ] || { echo "testpmd is not running in the guest" >&2; exit 2; }
# read-write: never blocks, even if the helper died since (a write-only open would wait)
printf '%s\n' "$req" 1<>"$w/req"
timeout "$3" cat "$w/resp" || {
    echo "no answer from testpmd" >&2; tail -n 15 "$w/log" >&2; exit 3
}
"""
"""One request to the helper, its whole answer on stdout."""

STOP = r"""
w=$1
[ -d "$w" ] || exit 0
if [ -e "$w/ready" ]; then
    printf 'stop;quit\n' 1<>"$w/req"
    timeout 20 cat "$w/resp" >/dev/null 2>&1
    pid=$(cat "$w/ready")
    i=0; while kill -0 "$pid" 2>/dev/null && [ $i -lt 50 ]; do sleep 0.2; i=$((i + 1)); done
    kill -KILL "$pid" 2>/dev/null
fi
rm -rf "$w"
"""

HELPER = Path(__file__).with_name("guest_helper.py")
"""Seen by the guest at the same path: its root is the host's, shared read-only."""


def guest_argv(pci: list[str], vcpus: int, queues: int) -> list[str]:
    """testpmd in the guest: macswap between its two NICs, main lcore 0, the rest forward."""
    allow = [a for bdf in pci for a in ("-a", bdf)]
    lcores = f"0-{vcpus - 1}"
    return [
        "dpdk-testpmd",
        "-l",
        lcores,
        "--main-lcore",
        "0",
        "--in-memory",
        "--file-prefix=kvmlab-guest-pvp",
        "-m",
        "128",
        *allow,
        "--",
        "-i",
        "--forward-mode=macswap",
        "--port-topology=paired",
        f"--nb-cores={max(vcpus - 1, 1)}",
        f"--rxq={queues}",
        f"--txq={queues}",
        "--total-num-mbufs=16384",
    ]


@dataclass
class GuestTestPmd(Counted):
    """testpmd running in a guest, read and typed at through the guest agent."""

    machine: Machine
    name: str = "guest"

    def _sh(self, script: str, *args: str, timeout: float = 120.0) -> str:
        result = self.machine.exec(["sh", "-c", script, "sh", *args], timeout=timeout)
        if result.returncode != 0:
            why = result.stderr.decode(errors="replace").strip()
            raise RuntimeFailure(f"{self.machine.config.name}: guest testpmd: {why}")
        return result.stdout.decode(errors="replace")

    def bind(self, macs: list[str]) -> list[str]:
        """NICs bound to DPDK (their PCI addresses, in the order of ``macs``)."""
        return self._sh(BIND, str(HUGEPAGES_2M), *macs).split()

    def start(self, argv: list[str]) -> None:
        """Start testpmd under the helper in the guest, wait for its prompt, start forwarding."""
        self._sh(START, WORK, " ".join(GUEST_DRIVERS), TRIM, str(HELPER), WORK, *argv)
        deadline = time.monotonic() + 180
        while True:
            ready = self.machine.exec(["cat", f"{WORK}/ready"])
            if ready.returncode == 0:
                break
            if time.monotonic() > deadline or self._helper_gone():
                log = self._sh(f"cat {WORK}/log {WORK}/helper.log 2>/dev/null; true")
                tail = "\n".join(log.splitlines()[-12:])
                raise RuntimeFailure(
                    f"{self.machine.config.name}: testpmd in the guest did not start:\n{tail}"
                )
            time.sleep(1)
        self.command("start")

    def _helper_gone(self) -> bool:
        found = self.machine.exec(["sh", "-c", f'kill -0 "$(cat {WORK}/helper.pid)"'])
        return found.returncode != 0

    def ask(self, *lines: str, limit: int = 60) -> list[tuple[float, str]]:
        """Type each line at the guest's testpmd (one agent round trip); per line the guest's
        clock when it was typed and what testpmd printed before its next prompt."""
        out = self._sh(ASK, WORK, ";".join(lines), str(limit), timeout=limit + 30)
        if "==kvmlab-error" in out:
            raise RuntimeFailure(f"{self.machine.config.name}: testpmd in the guest exited")
        answers = []
        for part in out.split("==kvmlab-at ")[1:]:
            stamp, _, text = part.partition("\n")
            answers.append((float(stamp), text.split("==kvmlab-end")[0]))
        if len(answers) != len(lines):
            raise RuntimeFailure(
                f"{self.machine.config.name}: guest testpmd answered "
                f"{len(answers)} of {len(lines)} commands"
            )
        return answers

    def command(self, line: str, limit: int = 60) -> str:
        """Type at the guest's testpmd; what it printed before its next prompt."""
        return self.ask(line, limit=limit)[0][1]

    def port_ids(self, macs: list[str]) -> tuple[int, ...]:
        """The DPDK port number of each NIC (by MAC: DPDK numbers ports in PCI scan order,
        not in the order they were allowed)."""
        found = port_macs(self.command("show port info all"))
        missing = [m for m in macs if m.lower() not in found]
        if missing:
            raise RuntimeFailure(
                f"{self.machine.config.name}: testpmd in the guest has no port "
                f"with MAC {', '.join(missing)} ({found})"
            )
        return tuple(found[m.lower()] for m in macs)

    def snapshot(self) -> Snapshot:
        """Port counters plus drops, stamped with the guest's clock when the command was
        typed (a trial's rates divide by the host's sending time instead: the agent's round
        trip under load takes seconds here, so the counters are read with nothing in flight)."""
        (at, ports), (_, fwd) = self.ask("show port stats all", "show fwd stats all")
        return add_fwd_stats(parse_port_stats(ports, at), fwd)

    def stop(self) -> None:
        """Quit testpmd in the guest and remove its files (the NICs stay with DPDK)."""
        self._sh(STOP, WORK)


_PORT_INFO = re.compile(r"Infos for port (\d+)\s*\*+\s*\nMAC address: ([0-9A-Fa-f:]{17})")


def port_macs(text: str) -> dict[str, int]:
    """``show port info all``: MAC (lower case) -> DPDK port number."""
    return {mac.lower(): int(port) for port, mac in _PORT_INFO.findall(text)}
