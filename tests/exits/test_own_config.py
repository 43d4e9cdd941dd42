"""A finding's fix in the configuration of a VM kvmlab did not start: a diff of its own
domain XML, or the options of its own QEMU command line, each read back to prove it holds
the fix; what cannot be carried over exactly is said so. Recorded real configurations
(libvirt's XML and the command line libvirt made of it); nothing runs."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import cast

import pytest

from kvmlab.errors import KvmlabError
from kvmlab.exits import own_config
from kvmlab.exits.foreign import argv_within
from kvmlab.exits.own_config import domain_config, own_fix, qemu_config, read_config
from kvmlab.guest.agent import ExecResult
from kvmlab.guest.errors import GuestError
from kvmlab.runtime.machine import Machine
from kvmlab.spec.importing import from_domain_xml, from_qemu_argv

DATA = Path(__file__).resolve().parents[1] / "spec" / "data" / "import"
WINDOWS_XML = (DATA / "windows-clock.xml").read_text()
WINDOWS_ARGV = shlex.split((DATA / "windows-clock.argv").read_text())
HAND = [
    "qemu-system-x86_64",
    "-name",
    "guest=byhand",
    "-machine",
    "q35,hpet=off",
    "-accel",
    "kvm",
    "-cpu",
    "host,kvmclock=off",
    "-m",
    "512M",
    "-kernel",
    "/boot/vmlinuz",
    "-append",
    "console=ttyS0 tsc=unstable",
]


def changed_lines(lines: list[str]) -> list[str]:
    return [x for x in lines if x[:1] in "+-" and not x.startswith(("+++", "---"))]


def test_a_domain_gets_a_diff_of_its_own_xml_that_holds_the_fix() -> None:
    config = domain_config(WINDOWS_XML, "qemu:///system", "win10")
    fix = own_fix(config, {"clock.timers.hpet.present": True})
    assert fix.exact and fix.kind == "domain"
    assert changed_lines(fix.lines) == [
        '-    <timer name="hpet" present="no" />',
        '+    <timer name="hpet" present="yes" />',
    ]
    assert "virsh -c qemu:///system edit win10" in fix.steps[0]
    assert "virsh -c qemu:///system shutdown win10" in fix.steps[1]
    assert fix.new_text is not None
    again = from_domain_xml(fix.new_text, "fixed").guest
    assert again["clock"]["timers"]["hpet"] == {"present": True}
    assert again["hyperv"] == config.imported.guest["hyperv"], "the rest is as it was"


def test_a_changed_attribute_keeps_the_domain_s_own_children() -> None:
    fix = own_fix(domain_config(WINDOWS_XML, "u", "win10"), {"clock.offset": "utc"})
    assert fix.exact
    assert changed_lines(fix.lines) == ['-  <clock offset="localtime">', '+  <clock offset="utc">']


def test_a_section_the_domain_lacks_is_added() -> None:
    xml = WINDOWS_XML.replace(
        WINDOWS_XML[WINDOWS_XML.index("  <clock") : WINDOWS_XML.index("</clock>") + 9], ""
    )
    assert "<clock" not in xml
    fix = own_fix(domain_config(xml, "u", "win10"), {"clock.timers.kvmclock.present": False})
    assert fix.exact, fix.notes
    assert any("kvmclock" in line for line in changed_lines(fix.lines))


def test_a_qemu_command_line_gets_its_own_options_changed() -> None:
    fix = own_fix(qemu_config(HAND, "pid 1"), {"clock.timers.kvmclock.present": True})
    assert fix.exact and fix.lines == ["-cpu host,kvmclock=off  ->  -cpu host,kvmclock=on"]
    assert "kvmlab never stops or restarts a VM it did not start" in fix.steps[0]
    hpet = own_fix(qemu_config(HAND, "pid 1"), {"clock.timers.hpet.present": True})
    assert hpet.lines == ["-machine q35,hpet=off  ->  -machine q35,hpet=on"]


def test_libvirt_s_spelling_of_a_command_line_is_edited_too() -> None:
    """``-no-hpet`` (libvirt's) goes when the fix sets ``-machine ...,hpet=``."""
    fix = own_fix(qemu_config(WINDOWS_ARGV, "pid 2"), {"clock.timers.hpet.present": True})
    assert fix.exact, fix.notes
    assert fix.lines[0].endswith(",memory-backend=pc.ram,hpet=on")
    assert fix.lines[1] == "drop -no-hpet (it sets -machine hpet)"
    assert fix.new_text is not None and "-no-hpet" not in fix.new_text
    guest = from_qemu_argv(fix.new_text, "fixed").guest
    assert guest["clock"]["timers"]["hpet"] == {"present": True}


def test_what_cannot_be_carried_over_is_shown_as_kvmlab_renders_it() -> None:
    twice = [*HAND, "-cpu", "host,kvmclock=off"]
    fix = own_fix(qemu_config(twice, "pid 3"), {"clock.timers.kvmclock.present": True})
    assert not fix.exact and fix.new_text is None
    assert "-cpu is given 2 times" in fix.notes[0]
    assert any(line.startswith("kvmlab's after:") and "kvmclock=on" in line for line in fix.lines)


def test_a_carrying_fault_is_caught_by_the_read_back(monkeypatch: pytest.MonkeyPatch) -> None:
    """The option edit broken from outside (it leaves the value as it was): the changed
    command line, read back, lacks the fix, and kvmlab says so instead of showing it."""
    monkeypatch.setattr(own_config, "_edited", lambda own, old, new: own)
    fix = own_fix(qemu_config(HAND, "pid 4"), {"clock.timers.kvmclock.present": True})
    assert not fix.exact
    assert "read back, lacks it" in fix.notes[0]


def test_an_unreadable_configuration_is_a_note_and_the_conditions_assumed() -> None:
    config, why = read_config("pid:5", ["qemu-system-x86_64", "disk.img", "-m"], None)
    assert config is None and "the rules' conditions are assumed" in why


def test_a_tcg_configuration_is_fixed_as_under_kvm() -> None:
    tcg = [*HAND[:5], "-accel", "tcg", *HAND[7:]]
    config, why = read_config("pid:6", tcg, None)
    assert config is not None and config.under_tcg
    assert "each fix is for it under KVM" in why
    assert own_fix(config, {"clock.timers.kvmclock.present": True}).exact


def test_a_domain_s_namespaced_elements_keep_their_prefixes() -> None:
    """virt-manager's libosinfo metadata and a qemu:commandline come back as written."""
    xml = WINDOWS_XML.replace(
        "<domain ",
        '<domain xmlns:qemu="http://libvirt.org/schemas/domain/qemu/1.0" ',
        1,
    ).replace(
        "</domain>",
        '  <metadata>\n    <libosinfo:libosinfo xmlns:libosinfo="http://libosinfo.org/xmlns/'
        'libvirt/domain/1.0">\n      <libosinfo:os id="http://microsoft.com/win/10"/>\n'
        "    </libosinfo:libosinfo>\n  </metadata>\n  <qemu:commandline>\n"
        '    <qemu:arg value="-no-reboot"/>\n  </qemu:commandline>\n</domain>',
    )
    fix = own_fix(domain_config(xml, "u", "win10"), {"clock.timers.hpet.present": True})
    assert fix.exact, fix.notes
    assert len(changed_lines(fix.lines)) == 2  # the timer only
    assert fix.new_text is not None and "ns0:" not in fix.new_text
    assert "<qemu:arg " in fix.new_text and "<libosinfo:os " in fix.new_text


def test_a_command_line_that_could_not_be_read_says_why() -> None:
    config, why = read_config("pid:7", [], None, "reading /proc/7/cmdline inside lab/l1: exit 1")
    assert config is None
    assert "(reading /proc/7/cmdline inside lab/l1: exit 1)" in why


class _Hyper:
    """A guest hypervisor whose exec ends as told."""

    def __init__(self, result: ExecResult | KvmlabError) -> None:
        self.result = result

    def exec(self, argv: list[str], timeout: float) -> ExecResult:
        if isinstance(self.result, KvmlabError):
            raise self.result
        return self.result


@pytest.mark.parametrize(
    ("result", "said"),
    [
        (ExecResult(1, b"", b"cat: /proc/9/cmdline: No such file"), "exit status 1 cat: /proc/9"),
        (ExecResult(0, b"q\0", b"", out_truncated=True), "its output cut"),
        (GuestError("the guest agent did not answer"), "the guest agent did not answer"),
    ],
)
def test_reading_a_command_line_inside_l1_fails_with_its_reason(
    result: ExecResult | KvmlabError, said: str
) -> None:
    argv, why = argv_within(cast(Machine, _Hyper(result)), "lab/l1", "pid:9")
    assert argv == [] and said in why and "/proc/9/cmdline inside lab/l1" in why


def test_a_command_line_read_inside_l1_is_split_on_its_nuls() -> None:
    argv, why = argv_within(
        cast(Machine, _Hyper(ExecResult(0, b"qemu\x00-m\x00256\x00", b""))), "l", "pid:9"
    )
    assert argv == ["qemu", "-m", "256"] and why == ""
