"""Whatever kvmlab writes into XML keeps the document well-formed: comments never hold
``--`` (libvirt's parser: "Double hyphen within comment"), and a character XML cannot
carry is refused rather than printed."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from kvmlab.errors import KvmlabError, RenderError
from kvmlab.render import render_libvirt
from kvmlab.render.xmldom import DomainXml, MalformedXml, comment_text, sub, xml_comment
from kvmlab.spec import load_lab
from tests.conftest import target_for


@pytest.mark.parametrize("text", ["--connect", "a---b", "ends-", "-", "--", "x\x01y"])
def test_comment_text_never_breaks_a_comment(text: str) -> None:
    body = comment_text(text)
    assert "--" not in body and not body.endswith("-")
    ET.fromstring(f"<a>{xml_comment(text)}</a>")


def test_a_note_with_double_hyphens_renders_well_formed() -> None:
    d = DomainXml.new("qemu")
    d.note("rendered for libvirt 9.0.0 assumed (no daemon asked; --connect asks one)")
    d.section("name").text = "vm"
    root = ET.fromstring(d.tostring())
    assert root.findtext("name") == "vm"


def test_a_control_character_in_a_value_is_refused() -> None:
    d = DomainXml.new("qemu")
    sub(d.section("os"), "cmdline", "console=ttyS0\x00rm")
    with pytest.raises(MalformedXml):
        d.tostring()


def test_render_libvirt_names_the_guest_for_a_value_xml_cannot_hold(tmp_path: Path) -> None:
    lab = tmp_path / "x.toml"
    lab.write_text('name = "x"\n[guests.vm]\nappend = "a\\u0001b"\n')
    try:
        loaded = load_lab(lab)
    except KvmlabError:
        return  # the spec refuses the character first: nothing reaches the XML
    guest = loaded.lab.guests["vm"]
    try:
        xml = render_libvirt(guest, target_for(loaded, ("vm",)))
    except RenderError as exc:
        assert "well-formed" in str(exc)
    else:  # the spec may refuse the character first; then nothing may reach the XML
        ET.fromstring(xml)
