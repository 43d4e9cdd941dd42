"""Lab files take values of the type each key wants: a boolean is
``true`` or ``false``, a whole number a TOML integer, a table a table. ``vcpus = true`` is
not 1, ``nested_paging = 0`` is not false, ``subnet = true`` is not 0.0.0.1/32; a date
where a table goes is said to be a date. Each refusal is one line naming the key, what was
found and what to write. The forms the reference promises (sizes as text or MiB, CPU sets
as text, numbers or lists, addresses as text, integers where a number goes) still work,
and so does every shipped lab with its variants. Nothing boots."""

from __future__ import annotations

import pytest

from kvmlab.errors import SpecError
from kvmlab.spec import LoadedLab, parse_lab

HEAD = 'name = "x"\n[guests.vm]\n'
BOOL = "is not true or false: write true or false, without quotes"
TABLE = "is not a table: write"

REFUSED = {
    "vcpus-true": (
        HEAD + "vcpus = true\n",
        "guests.vm.vcpus",
        "true is not a whole number: give a whole number from 1 to 288",
    ),
    "vcpus-text": (
        HEAD + 'vcpus = "2"\n',
        "guests.vm.vcpus",
        "'2' is not a whole number: give a whole number from 1 to 288",
    ),
    "vcpus-float": (
        HEAD + "vcpus = 2.0\n",
        "guests.vm.vcpus",
        "2.0 is not a whole number: give a whole number from 1 to 288 (write 2, without a "
        "decimal point)",
    ),
    "host-port-true": (
        HEAD + 'nics = [{ type = "user", forwards = [{ host_port = true, guest_port = 22 }] }]\n',
        "guests.vm.nics[0].forwards[0].host_port",
        "true is not a whole number: give a whole number from 1 to 65535",
    ),
    "exit-profile-true": (
        'name = "x"\n[bench]\nexit_profile = true\n[guests.vm]\n',
        "bench.exit_profile",
        "true is not a number: give a number from 0 to 600",
    ),
    "nested-paging-0": (
        HEAD + "nested = true\nkvm = { nested_paging = 0 }\n",
        "guests.vm.kvm.nested_paging",
        f"0 {BOOL}",
    ),
    "nested-paging-yes": (
        HEAD + 'nested = true\nkvm = { nested_paging = "yes" }\n',
        "guests.vm.kvm.nested_paging",
        f"'yes' {BOOL}",
    ),
    "nested-paging-nan": (
        HEAD + "nested = true\nkvm = { nested_paging = nan }\n",
        "guests.vm.kvm.nested_paging",
        f"nan {BOOL}",
    ),
    "migratable-1": (HEAD + "migratable = 1\n", "guests.vm.migratable", f"1 {BOOL}"),
    "timer-text": (
        HEAD + 'clock = { timers = { rtc = { present = "true" } } }\n',
        "guests.vm.clock.timers.rtc.present",
        f"'true' {BOOL}",
    ),
    "switch-hugepages-1": (
        'name = "x"\n[switch]\nkind = "testpmd"\nhugepages = 1\n[guests.vm]\n',
        "switch.hugepages",
        f"1 {BOOL}",
    ),
    "switch-queues-true": (
        'name = "x"\n[switch]\nkind = "testpmd"\nqueues = true\n[guests.vm]\n',
        "switch.queues",
        "true is not a whole number: give a whole number from 1 to 16",
    ),
    "subnet-true": (
        'name = "x"\n[networks.n]\nsubnet = true\n[guests.vm]\n',
        "networks.n.subnet",
        'true is not an IPv4 network (like 10.0.0.0/24): write one as text, e.g. "10.77.0.0/24"',
    ),
    "host-addr-integer": (
        HEAD + 'nics = [{ type = "user", forwards = [{ host_port = 2222, guest_port = 22, '
        "host_addr = 2130706433 }] }]\n",
        "guests.vm.nics[0].forwards[0].host_addr",
        '2130706433 is not an IPv4 address (like 127.0.0.1): write one as text, e.g. "127.0.0.1"',
    ),
    "memory-date": (
        HEAD + "memory = 2024-01-01\n",
        "guests.vm.memory",
        '2024-01-01 (a date) is not a size or a table: write memory = "2G" or memory = '
        '{ size = "2G", ... }',
    ),
    "kvm-date-time": (
        HEAD + "nested = true\nkvm = 2024-01-01T00:00:00\n",
        "guests.vm.kvm",
        f"2024-01-01T00:00:00 (a date-time) {TABLE} kvm = {{ KEY = VALUE, ... }} or a "
        "[guests.vm.kvm] section",
    ),
    "when-tcg-time": (
        HEAD + "when_tcg = 07:32:00\n",
        "guests.vm.when_tcg",
        f"07:32:00 (a time) {TABLE} when_tcg = {{ KEY = VALUE, ... }} or a "
        "[guests.vm.when_tcg] section",
    ),
    "disk-date": (
        HEAD + "disks = [1979-05-27]\n",
        "guests.vm.disks[0]",
        f"1979-05-27 (a date) {TABLE} each entry as {{ KEY = VALUE, ... }}",
    ),
    "cpu-array": (
        HEAD + "cpu = [1, 2]\n",
        "guests.vm.cpu",
        f"a list {TABLE} cpu = {{ KEY = VALUE, ... }} or a [guests.vm.cpu] section",
    ),
    "machine-number": (
        HEAD + "machine = 5\n",
        "guests.vm.machine",
        "5 is not one of 'q35', 'pc' or 'microvm': write one of them",
    ),
    "nic-type": (
        HEAD + 'nics = [{ type = "foo" }]\n',
        "guests.vm.nics[0]",
        "type 'foo' is not known: give type = one of 'user', 'tap', 'vhost-net', 'vhost-user'",
    ),
    "nic-no-type": (
        HEAD + 'nics = [{ model = "virtio" }]\n',
        "guests.vm.nics[0]",
        "has no type: give type = one of 'user', 'tap', 'vhost-net', 'vhost-user'",
    ),
    "when-tcg-true": (
        HEAD + "when_tcg = { vcpus = true }\n",
        "guests.vm.when_tcg.vcpus",
        "true is not a whole number: give a whole number from 1 to 288",
    ),
    "variant-true": (
        HEAD + "[variants.v.guests.vm]\nvcpus = true\n",
        "variants.v.guests.vm.vcpus",
        "true is not a whole number: give a whole number from 1 to 288",
    ),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_a_value_of_another_type_is_refused_in_one_line(case: str) -> None:
    text, key, message = REFUSED[case]
    with pytest.raises(SpecError) as caught:
        parse_lab(text.encode(), "lab.toml")
    assert caught.value.lines() == [f"lab.toml: {key}: {message}"]


PROMISED = {
    "memory-text": HEAD + 'memory = "1.5G"\n',
    "memory-mib": HEAD + "memory = 2048\n",
    "memory-table": HEAD + 'memory = { size = "2G", prealloc = true }\n',
    "cpu-set-text": HEAD
    + 'vcpus = 2\npinning = { vcpus = { 0 = "0-1", 1 = "1" }, emulator = "0" }\n',
    "cpu-set-number": HEAD + "pinning = { emulator = 1 }\n",
    "cpu-set-list": HEAD + "pinning = { emulator = [0, 1] }\n",
    "integer-for-a-number": 'name = "x"\n[bench]\nduration = 5\nexit_profile = 10\n[guests.vm]\n',
    "addresses-as-text": 'name = "x"\n[networks.lan]\nsubnet = "10.77.0.0/24"\n'
    '[guests.vm]\nnics = [{ type = "tap", network = "lan", address = "10.77.0.11/24" }, '
    '{ type = "user", forwards = [{ host_port = 2222, guest_port = 22, '
    'host_addr = "127.0.0.2" }] }]\n',
    "switch": 'name = "x"\n[switch]\nkind = "ovs-dpdk"\ncores = "1"\nmemory = "1G"\n[guests.vm]\n',
    "when-tcg": HEAD + 'vcpus = 2\nwhen_tcg = { vcpus = 1, memory = "2G" }\n',
}


@pytest.mark.parametrize("case", sorted(PROMISED))
def test_the_documented_forms_still_work(case: str) -> None:
    parse_lab(PROMISED[case].encode(), "lab.toml")


def test_every_shipped_lab_and_variant_validates_strictly(shipped_lab: LoadedLab) -> None:
    """``variants()`` and ``under()`` validate the lab again from its own dump (sizes as text,
    addresses as objects): strict types take those too."""
    for variant in shipped_lab.variants().values():
        for _, guest in variant.lab.walk():
            assert guest.under("tcg").vcpus >= 1


def test_pydantics_too_long_integer_text_is_said_in_kvmlabs_words() -> None:
    """Strict types never parse text as a number, so no lab file reaches pydantic's
    "Unable to parse input string as an integer, exceeded maximum size"; if a caller does,
    it is said in kvmlab's words, with what the key takes."""
    from pydantic_core import ErrorDetails

    from kvmlab.spec import Lab
    from kvmlab.spec.messages import explain

    err: ErrorDetails = {
        "type": "int_parsing_size",
        "loc": ("guests", "vm", "vcpus"),
        "msg": "Unable to parse input string as an integer, exceeded maximum size",
        "input": "1" * 5000,
        "ctx": {},
    }
    assert explain(err, Lab) == (
        "guests.vm.vcpus",
        f"'{'1' * 60}...' (5000 characters) is far too long a number: give a whole number "
        "from 1 to 288",
    )
