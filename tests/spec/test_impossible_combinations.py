"""What ``check`` refuses because it cannot work on any host: VT-x-only
and AMD-V-only KVM parameters in one ``kvm`` or ``host_kvm`` table, and a ``[bench]
headline`` naming a workload the lab never runs or a metric no workload stores. The metric
names spec checks against are its own tables (spec imports no higher layer); this module
holds them to what kvmlab.bench, exits, migrate and net store (the suite's workloads and
metrics: tests/bench/test_registry.py). Nothing boots."""

from __future__ import annotations

import pytest

from kvmlab.errors import SpecError
from kvmlab.spec import parse_lab
from kvmlab.spec.bench import (
    EXIT_KINDS,
    MIGRATION_METRICS,
    MIGRATION_PREFIX,
    PVP_HOPS,
)

HEAD = 'name = "x"\n[guests.vm]\n'
VENDORS = (
    "(VT-x only, kvm_intel) and {amd} (AMD-V only, kvm_amd) cannot both apply: a CPU is one "
    "or the other, so one of them would stop the run; keep only the keys of the CPU the lab "
    "runs on"
)


def problems(text: str) -> list[str]:
    with pytest.raises(SpecError) as caught:
        parse_lab(text.encode(), "lab.toml")
    return caught.value.lines()


@pytest.mark.parametrize(
    ("text", "key", "amd"),
    [
        (
            HEAD + "nested = true\nkvm = { vmcs_shadowing = true, vls = true }\n",
            "guests.vm.kvm",
            "vls",
        ),
        (
            'name = "x"\nhost_kvm = { vmcs_shadowing = false, vls = true, vgif = false }\n'
            "[guests.vm]\n",
            "host_kvm",
            "vls and vgif",
        ),
    ],
)
def test_intel_and_amd_parameters_in_one_table_are_refused(text: str, key: str, amd: str) -> None:
    message = "vmcs_shadowing " + VENDORS.format(amd=amd)
    assert problems(text) == [f"lab.toml: {key}: {message}"]


def test_either_vendors_parameters_alone_pass() -> None:
    parse_lab(
        (HEAD + "nested = true\nkvm = { vmcs_shadowing = false, nested = true }\n").encode(), "l"
    )
    parse_lab((HEAD + "nested = true\nkvm = { vls = false, vgif = true }\n").encode(), "l")


GUEST = "[guests.vm]\n"
NESTED = GUEST + 'nested = true\nmemory = "2G"\n[guests.vm.guests.l2]\n'
HEADLINES = {
    "unknown-metric": (
        'name = "x"\n[bench]\nheadline = ["cpu.nope"]\n' + GUEST,
        "'cpu.nope': cpu stores no metric 'nope': name one it stores, 1thread_events_per_s, "
        "allcpus_events_per_s",
    ),
    "left-out": (
        'name = "x"\n[bench]\nworkloads = ["cpu"]\nheadline = ["disk.randread_iops"]\n' + GUEST,
        "'disk.randread_iops': [bench] workloads leaves out disk, so no run has it: add disk "
        "to workloads or drop this headline",
    ),
    "no-exit-profile": (
        'name = "x"\n[bench]\nheadline = ["exits.all_per_s"]\n' + NESTED,
        "'exits.all_per_s': exits rows come from [bench] exit_profile, which is 0: set it "
        "(seconds) or drop this headline",
    ),
    "no-nested-guest": (
        'name = "x"\n[bench]\nexit_profile = 5\nheadline = ["exits.all_per_s"]\n' + GUEST,
        "'exits.all_per_s': exits profiles guests inside a guest hypervisor, and the lab has "
        "none: add one or drop this headline",
    ),
    "no-switch": (
        'name = "x"\n[bench]\nheadline = ["pvp.64B received"]\n' + GUEST,
        "'pvp.64B received': pvp runs through the lab's [switch], and the lab has none: add "
        "one or drop this headline",
    ),
    "no-such-migration": (
        'name = "x"\n[bench]\nheadline = ["migrate b.total time"]\n'
        '[[migrations]]\nname = "a"\nguest = "vm"\n' + GUEST + "migratable = true\n",
        "'migrate b.total time': the lab has no migration 'b' (its [[migrations]]: a): name "
        "one of them or add it",
    ),
    "migrations-workload": (
        'name = "x"\n[bench]\nheadline = ["migrations.total time"]\n'
        '[[migrations]]\nname = "a"\nguest = "vm"\n' + GUEST + "migratable = true\n",
        "'migrations.total time': migrations are stored as 'migrate NAME', one per "
        "[[migrations]] entry: write e.g. 'migrate a.total time'",
    ),
}


@pytest.mark.parametrize("case", sorted(HEADLINES))
def test_a_headline_nothing_stores_is_refused(case: str) -> None:
    text, message = HEADLINES[case]
    assert problems(text) == [f"lab.toml: bench.headline[0]: {message}"]


def test_headlines_the_lab_stores_pass() -> None:
    parse_lab(
        (
            'name = "x"\n[bench]\nexit_profile = 5\nheadline = ["kbuild.build_elapsed_s", '
            '"exits.npf_per_s", "migrate a.guest downtime", "boot.total_s"]\n'
            '[[migrations]]\nname = "a"\nguest = "m"\n'
            '[switch]\nkind = "testpmd"\n' + NESTED + "[guests.m]\nmigratable = true\n"
        ).encode(),
        "lab.toml",
    )


def test_the_shipped_lab_with_headlines_passes() -> None:
    from tests.conftest import LABS

    parse_lab((LABS / "paging-matrix.toml").read_bytes(), "paging-matrix.toml")


# -- the tables spec checks against are what kvmlab stores -------------------------------------


def test_exit_kinds_are_the_exits_kinds() -> None:
    from kvmlab.exits.names import KINDS

    assert KINDS == EXIT_KINDS


def test_migration_metrics_are_what_a_comparison_stores() -> None:
    from kvmlab.migrate.compare import METRICS
    from kvmlab.migrate.stored import VERIFIED
    from kvmlab.results.model import MIGRATION_PREFIX as STORED_PREFIX

    assert (*(name for name, _, _ in METRICS), VERIFIED) == MIGRATION_METRICS
    assert STORED_PREFIX == MIGRATION_PREFIX


def test_pvp_hops_are_where_pvp_counts() -> None:
    from kvmlab.fabric.switch import GEN_PORT, SINK_PORT
    from kvmlab.net.pvp import loopback_hops, pvp_hops

    ports = [GEN_PORT, "a", "b", SINK_PORT]
    hops = [h.name for h in (*pvp_hops(ports, ("a", "b")), *loopback_hops(ports))]
    assert set(hops) == set(PVP_HOPS)
