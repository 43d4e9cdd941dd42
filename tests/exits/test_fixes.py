"""A rule's fix made concrete: applied to a lab, rendered for QEMU and libvirt before and
after, and written as a variant that loads back as a lab."""

from __future__ import annotations

import tomllib
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from kvmlab.errors import SpecError, UsageError
from kvmlab.exits.fixes import (
    fix_renders,
    guest_context,
    plan_fix,
    toml_value,
    variant_toml,
    write_variant_lab,
    xml_diff,
)
from kvmlab.exits.rules import load_rules
from kvmlab.spec import LoadedLab, load_lab, parse_lab
from tests.conftest import LABS, target_for

WINDOWS = LABS / "windows-hpet.toml"
HPET_LINE = "timers.hpet = { present = true }\n"
RULES = {r.id: r for r in load_rules()}


def windows_lab(hpet_line: str) -> LoadedLab:
    """windows-hpet.toml with its HPET line replaced (before the HPET fix)."""
    text = WINDOWS.read_text()
    assert HPET_LINE in text
    data = text.replace(HPET_LINE, hpet_line).encode()
    return LoadedLab(lab=parse_lab(data, "windows.toml"), path=WINDOWS, digest="test")


def rtc_change(loaded: LoadedLab) -> dict[str, object]:
    rule = RULES["rtc-port-storm"]
    guest = loaded.lab.guests["win10"]
    return plan_fix(rule.fix.lab, rule.fix.add, (), (), guest_context(guest)).lab


def test_rtc_fix_turns_hpet_back_on() -> None:
    loaded = windows_lab("timers.hpet = { present = false }\n")
    change = rtc_change(loaded)
    assert change == {"clock.timers.hpet.present": True}
    render = fix_renders(loaded.lab, ("win10",), change, target_for(loaded, ("win10",), "kvm"))
    assert render.args_added == ["-machine q35,hpet=on"]
    assert render.args_removed == ["-machine q35,hpet=off"]
    (xml,) = render.xml_changes
    assert xml.parent == "/domain/clock"
    assert xml.before == '<timer name="hpet" present="no" />'
    assert xml.after == '<timer name="hpet" present="yes" />'
    assert render.lab.guests["win10"].clock.timers.hpet.present is True
    assert "hpet=on" in " ".join(render.qemu_after) and render.xml_after is not None


def test_hpet_left_unset_is_added_to_the_clock() -> None:
    loaded = windows_lab("")
    change = rtc_change(loaded)
    render = fix_renders(loaded.lab, ("win10",), change, target_for(loaded, ("win10",), "kvm"))
    assert render.args_added == ["-machine q35,hpet=on"] and render.args_removed == ["-machine q35"]
    (xml,) = render.xml_changes
    assert (xml.parent, xml.before, xml.after) == (
        "/domain/clock",
        None,
        '<timer name="hpet" present="yes" />',
    )


def test_enlightenments_added_to_a_guest_without_hyperv() -> None:
    loaded = load_lab(LABS / "basic.toml")
    path = next(iter(loaded.lab.guests))
    rule = RULES["windows-no-enlightenments"]
    guest = loaded.lab.guests[path]
    change = plan_fix(rule.fix.lab, rule.fix.add, (), (), guest_context(guest)).lab
    render = fix_renders(loaded.lab, (path,), change, target_for(loaded, (path,), "kvm"))
    (cpu,) = [a for a in render.args_added if a.startswith("-cpu ")]
    assert "hv-stimer=on" in cpu and "hv-time=on" in cpu and "hv-spinlocks=0x1fff" in cpu
    parents = {c.parent for c in render.xml_changes}
    assert parents == {"/domain/features", "/domain/clock"}
    hyperv = next(c.after for c in render.xml_changes if c.parent == "/domain/features")
    assert hyperv is not None and ET.fromstring(hyperv).find("stimer") is not None


@pytest.mark.parametrize(
    ("change", "key", "says"),
    [
        ({"clock.timers.hpet.present": "maybe"}, "guests.win10.clock.timers.hpet.present", "bool"),
        ({"clock.timers.hpet.presnt": True}, "guests.win10.clock.timers.hpet.presnt", "Extra"),
        (
            {"clock.timers.hypervclock.present": False},
            "guests.win10.hyperv.features",
            "'stimer' needs clock.timers.hypervclock.present = true",
        ),
        ({"memory.size.x": 1}, "guests.win10.memory.size.x", "is a value, not a table"),
    ],
)
def test_a_change_that_breaks_the_lab_names_the_key(
    change: dict[str, object], key: str, says: str
) -> None:
    loaded = load_lab(WINDOWS)
    with pytest.raises(SpecError) as caught:
        fix_renders(loaded.lab, ("win10",), change, target_for(loaded, ("win10",), "kvm"))
    assert any(p.path == key and says in p.message for p in caught.value.problems), [
        str(p) for p in caught.value.problems
    ]


def test_unknown_guest_is_a_usage_error() -> None:
    loaded = load_lab(WINDOWS)
    with pytest.raises(UsageError, match="no guest nope"):
        fix_renders(loaded.lab, ("nope",), {}, target_for(loaded, ("nope",), "kvm"))


def test_xml_diff_finds_the_smallest_changed_elements() -> None:
    before = ET.fromstring('<domain><a x="1"><b name="p"/><b name="q">t</b></a><c/></domain>')
    after = ET.fromstring('<domain><a x="1"><b name="p"/><b name="q">u</b></a><d/></domain>')
    changes = [(c.parent, c.before, c.after) for c in xml_diff(before, after)]
    assert changes == [
        ("/domain/a", '<b name="q">t</b>', '<b name="q">u</b>'),
        ("/domain", "<c />", None),
        ("/domain", None, "<d />"),
    ]


# --- variants --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        True,
        False,
        0,
        -7,
        1.5,
        float("inf"),
        "plain",
        'q"uote\\back\nline\ttab\x01\x7f é',
        ["relaxed", "vapic"],
        [],
        {"0": "2", "1": "3"},
        {},
        {"a.b": [1, {"c": False}]},
    ],
)
def test_toml_values_round_trip(value: object) -> None:
    assert tomllib.loads(f"k = {toml_value(value)}")["k"] == value


def test_variant_toml_round_trips_through_parse_lab() -> None:
    change = {
        "clock.timers.hpet.present": True,
        "vcpus": 2,
        "hyperv.features": ["relaxed", "vapic", "vpindex", "synic", "stimer"],
        "clock.timers.hypervclock.present": True,
        "pinning.vcpus": {"0": "2"},
    }
    snippet = variant_toml("hpet-on", ("win10",), change)
    assert snippet.startswith("[variants.hpet-on.guests.win10]\nvcpus = 2\n")
    assert "[variants.hpet-on.guests.win10.clock.timers.hpet]\npresent = true\n" in snippet
    base = windows_lab("timers.hpet = { present = false }\n")
    text = WINDOWS.read_text().replace(HPET_LINE, "timers.hpet = { present = false }\n")
    lab = parse_lab((text + "\n" + snippet).encode(), "with-variant.toml")
    variant = LoadedLab(lab=lab, path=WINDOWS, digest="x").variants()["hpet-on"].lab
    guest = variant.guests["win10"]
    assert guest.clock.timers.hpet.present is True and guest.pinning.vcpus == {"0": (2,)}
    assert base.lab.guests["win10"].clock.timers.hpet.present is False


def test_variant_toml_for_a_nested_guest() -> None:
    snippet = variant_toml("fix", ("l1", "l2"), {"memory.backing": "hugepages"})
    assert snippet == '[variants.fix.guests.l1.guests.l2.memory]\nbacking = "hugepages"\n'
    with pytest.raises(UsageError):
        variant_toml("Bad Name", ("l1",), {"vcpus": 1})
    with pytest.raises(UsageError, match="changes nothing"):
        variant_toml("fix", ("l1",), {})


def test_write_variant_lab(tmp_path: Path) -> None:
    source = tmp_path / "win.toml"
    source.write_text(WINDOWS.read_text().replace(HPET_LINE, "timers.hpet = { present = false }\n"))
    dest = tmp_path / "win-fixed.toml"
    change = {"clock.timers.hpet.present": True}
    out = write_variant_lab(source, dest, "hpet-on", ("win10",), change, comment="rtc-port-storm")
    text = out.read_text()
    assert text.startswith(source.read_text()) and "# rtc-port-storm\n[variants.hpet-on" in text
    variants = load_lab(out).variants()
    assert list(variants) == ["default", "hpet-on"]  # the lab as written, then the fix
    assert variants["default"].lab.guests["win10"].clock.timers.hpet.present is False
    assert variants["hpet-on"].lab.guests["win10"].clock.timers.hpet.present is True
    with pytest.raises(UsageError, match="exists"):
        write_variant_lab(source, dest, "other", ("win10",), change)
    assert dest.read_text() == text
    with pytest.raises(UsageError, match="already has a variant"):
        write_variant_lab(out, tmp_path / "again.toml", "hpet-on", ("win10",), change)


def test_write_variant_lab_refuses_an_invalid_result(tmp_path: Path) -> None:
    dest = tmp_path / "broken.toml"
    with pytest.raises(SpecError) as caught:
        write_variant_lab(
            WINDOWS, dest, "off", ("win10",), {"clock.timers.hypervclock.present": False}
        )
    assert any(p.path.startswith("variants.off.guests.win10") for p in caught.value.problems)
    assert not dest.exists()
