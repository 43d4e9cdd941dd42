"""diagnose --apply's define step against libvirt's own test driver (``test:///default``,
in this process): the definition is replaced only while it is still the one the fix was
made from, and only by the same domain; a change made from outside between the read and
the define (another connection) wins, and nothing is defined."""

from __future__ import annotations

from collections.abc import Iterator

import libvirt
import pytest

from kvmlab.errors import UsageError
from kvmlab.runtime.libvirt.domain_xml import domain_xml, redefine

URI = "test:///default"


@pytest.fixture
def domain() -> Iterator[str]:
    """A persistent domain of the test driver, its definition as read."""
    conn = libvirt.open(URI)
    xml = domain_xml(URI, "test")
    yield xml
    conn.defineXML(xml)  # as it was, for the next test (the driver lives per process)
    conn.close()


def _described(xml: str, text: str) -> str:
    """``xml`` with a description (the test driver's domain has none)."""
    return xml.replace("</name>", f"</name>\n  <description>{text}</description>", 1)


def test_the_fix_is_defined_while_the_definition_is_unchanged(domain: str) -> None:
    redefine(URI, "test", domain, _described(domain, "fixed"))
    assert "<description>fixed</description>" in domain_xml(URI, "test")


def test_a_change_from_outside_after_the_read_wins_and_nothing_is_defined(domain: str) -> None:
    outside = libvirt.open(URI)  # another client, between kvmlab's read and its define
    outside.defineXML(_described(domain, "by someone else"))
    outside.close()
    with pytest.raises(UsageError, match="changed while kvmlab diagnosed it"):
        redefine(URI, "test", domain, _described(domain, "fixed"))
    now = domain_xml(URI, "test")
    assert "by someone else" in now and "fixed" not in now


def test_xml_of_another_domain_is_not_defined(domain: str) -> None:
    other = domain.replace("<name>test</name>", "<name>other</name>")
    with pytest.raises(UsageError, match="name or UUID"):
        redefine(URI, "test", domain, other)
    conn = libvirt.open(URI)
    assert "other" not in [d.name() for d in conn.listAllDomains()]
    conn.close()
