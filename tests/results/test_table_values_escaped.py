"""A value from the results database never reaches the terminal as an escape sequence."""

from __future__ import annotations


def test_terminal_escapes_in_table_values_are_printed_escaped() -> None:
    """A value from the database (a lab name, a guest, an imported reason) never reaches
    the terminal as an escape sequence: tables print it escaped, line breaks kept."""
    import io

    from rich.console import Console
    from rich.text import Text

    from kvmlab.report.grid import Col, print_grid

    out = io.StringIO()
    print_grid(
        Console(file=out, width=200),
        [Col("lab"), Col("note")],
        [["x\x1b[2Jy", Text("a\x07b")], ["two\nlines", "ok"]],
        title="runs \x1b]0;pwned\x07",
    )
    text = out.getvalue()
    assert "\x1b" not in text and "\x07" not in text
    assert "x\\x1b[2Jy" in text and "runs \\x1b]0;pwned\\x07" in text
    assert "two lines" in text
