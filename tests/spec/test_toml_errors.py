"""A lab file's TOML errors in kvmlab's words: a key set twice is
named with its table and the line (tomllib says only "Cannot overwrite a value"), a table
declared twice too, and an integer too long for Python to read (a ValueError tomllib lets
through, not a TOMLDecodeError) is one line naming its line, column and key, not a
traceback. ``check`` runs as a user would for the reported cases. Nothing boots."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvmlab.errors import SpecError
from kvmlab.spec import parse_lab
from tests.spec.labcheck import refused

HEAD = 'name = "x"\n[guests.vm]\n'
ONCE = "a TOML file sets each key once: remove or merge one of the two"
LONG = (
    "longer than any TOML integer (at most 19 digits): give the value the key takes "
    "('kvmlab check --explain' lists them)"
)


def problem(text: str) -> str:
    with pytest.raises(SpecError) as caught:
        parse_lab(text.encode(), "lab.toml")
    (line,) = caught.value.lines()
    return line.removeprefix("lab.toml: ")


TWICE = {
    "key": (
        HEAD + "vcpus = 1\nvcpus = 2\n",
        f"line 4: guests.vm.vcpus is set a second time; {ONCE}",
    ),
    "top-level": ('name = "x"\nname = "y"\n', f"line 2: name is set a second time; {ONCE}"),
    "dotted": (
        HEAD + 'cpu.model = "max"\ncpu.model = "EPYC"\n',
        f"line 4: guests.vm.cpu.model is set a second time; {ONCE}",
    ),
    "multi-line-value": (
        HEAD + 'cpu.features = [\n  "+vmx",\n]\ncpu.features = [\n  "-svm",\n]\n',
        f"line 8: guests.vm.cpu.features is set a second time; {ONCE}",
    ),
    "array-of-tables": (
        'name = "x"\n[[migrations]]\nname = "a"\nname = "b"\n[guests.vm]\n',
        f"line 4: migrations[0].name is set a second time; {ONCE}",
    ),
    "quoted": (
        'name = "x"\n[guests.vm]\n"vcpus" = 1\nvcpus = 2\n',
        f"line 4: guests.vm.vcpus is set a second time; {ONCE}",
    ),
    "table-over-value": (
        HEAD + "memory = 1024\n[guests.vm.memory]\n",
        f"line 4: [guests.vm.memory] declares a table, but guests.vm.memory already has a "
        f"value; {ONCE}",
    ),
    "table": (
        HEAD + "vcpus = 1\n[guests.vm]\n",
        "line 4: [guests.vm] is declared a second time; a table is declared once: merge the "
        "two [guests.vm] sections into one",
    ),
    "inline-table": (
        HEAD + 'nics = [{ type = "user", type = "tap" }]\n',
        "line 3, column 38: key 'type' is set a second time in one inline table { ... }: "
        "remove one of the two",
    ),
    "inline-then-dotted": (
        HEAD + 'cpu = { model = "max" }\ncpu.cores = 2\n',
        "line 4, column 14: guests.vm.cpu is an inline table or array (guests.vm.cpu = { ... } "
        "or [ ... ]), which cannot be added to later: put everything inside it, or write "
        "[guests.vm.cpu] sections",
    ),
}


@pytest.mark.parametrize("case", sorted(TWICE))
def test_a_key_set_twice_is_named_with_its_line(case: str) -> None:
    text, expected = TWICE[case]
    assert problem(text) == expected


DIGITS = "1" * 5000
HUGE = {
    "plain": (HEAD + f"vcpus = {DIGITS}\n", "line 3, column 9: guests.vm.vcpus: an integer"),
    "negative": (HEAD + f"vcpus = -{DIGITS}\n", "line 3, column 9: guests.vm.vcpus: an integer"),
    "underscores": (
        HEAD + "vcpus = " + "1_" * 4400 + "1\n",
        "line 3, column 9: guests.vm.vcpus: an integer of 4401 digits",
    ),
    "inline": (
        HEAD + f"nested = true\nkvm = {{ vls = true, nested_paging = {DIGITS} }}\n",
        "line 4, column 37: guests.vm.kvm.nested_paging: an integer",
    ),
    "array-of-tables": (
        'name = "x"\n[guests.vm]\n[[migrations]]\nname = "m"\nguest = "vm"\n'
        f"repetitions = {DIGITS}\n",
        "line 6, column 15: migrations[0].repetitions: an integer",
    ),
    "after-a-long-string": (
        f'name = "x"\ndescription = "{DIGITS}"\n[guests.vm]\nvcpus = {DIGITS}\n',
        "line 4, column 9: guests.vm.vcpus: an integer",
    ),
}


@pytest.mark.parametrize("case", sorted(HUGE))
def test_an_integer_too_long_to_read_is_one_line(case: str) -> None:
    text, start = HUGE[case]
    line = problem(text)
    assert line.startswith(start) and line.endswith(LONG), line


def test_the_reported_case_through_check(tmp_path: Path) -> None:
    lab, line = refused(tmp_path, HEAD + f"vcpus = {DIGITS}\n")
    assert line == (
        f"kvmlab: {lab}: line 3, column 9: guests.vm.vcpus: an integer of 5000 digits, {LONG}"
    )
    lab, line = refused(tmp_path, HEAD + "vcpus = 1\nvcpus = 2\n")
    assert line == f"kvmlab: {lab}: line 4: guests.vm.vcpus is set a second time; {ONCE}"


def test_an_integer_beyond_64_bits_is_refused_by_key() -> None:
    """Python reads a hexadecimal one of thousands of digits (a power-of-two base); TOML says
    an integer is 64-bit, so kvmlab refuses it before the models see it."""
    assert problem(HEAD + "vcpus = 0x" + "f" * 4000 + "\n") == (
        "guests.vm.vcpus: a number of about 4817 digits is beyond TOML's integers (64-bit, at "
        "most 19 digits): give the value the key takes ('kvmlab check --explain')"
    )


def test_other_syntax_errors_keep_their_position() -> None:
    assert problem(HEAD + "vcpus = = 2\n") == (
        "line 3, column 9: TOML syntax: Invalid value; fix the TOML there"
    )
