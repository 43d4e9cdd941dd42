"""Tables that never shorten or split a value, on a terminal or in a pipe.

On a terminal: a rich table whose columns are never narrower than their longest word, so
cells wrap between words only; when even that does not fit, the table is drawn wider than
the terminal (which then wraps lines) rather than cut. Anywhere else (a pipe, a file): plain
columns two spaces apart, every value whole, no box characters, no trailing spaces.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from rich.cells import cell_len
from rich.text import Text

from kvmlab.errors import printable

if TYPE_CHECKING:
    from rich.console import Console

Cell = str | Text
"""A ``str`` is shown as it is (never read as rich markup); a ``Text`` keeps its styles."""

GAP = "  "
PAD_LIMIT = 40
"""In plain output a column is padded to its widest value up to this; a longer value pushes
the rest of its own line right instead of widening every line."""


@dataclass(frozen=True)
class Col:
    """A column: its header (``\\n`` separates header lines on a terminal) and alignment."""

    header: str
    justify: Literal["left", "right"] = "left"


def print_grid(
    console: Console,
    columns: Sequence[Col],
    rows: Sequence[Sequence[Cell]],
    title: str | None = None,
    caption: str | None = None,
) -> None:
    """Print a table whose values are never cut (see the module docstring); a control
    character in a value (a string from the results database, an imported file) is printed
    escaped (``\\x1b``), never sent to the terminal."""
    cells = [[_safe_text(c) for c in row] for row in rows]
    columns = [Col(_safe(c.header), c.justify) for c in columns]
    title = None if title is None else _safe(title)
    caption = None if caption is None else _safe(caption)
    if console.is_terminal:
        _print_rich(console, columns, cells, title, caption)
        return
    lines = list(plain_lines(columns, cells, title, caption))  # printed at once: faster
    console.print(Text("\n").join(lines), soft_wrap=True, highlight=False)


def _safe(text: str) -> str:
    """``text`` with control characters escaped, line breaks kept (cells wrap on them)."""
    if text.replace("\n", "").isprintable():
        return text
    return "\n".join(printable(line) for line in text.split("\n"))


def _safe_text(cell: Cell) -> Text:
    if not isinstance(cell, Text):
        return Text(_safe(cell))
    plain = cell.plain
    if _safe(plain) == plain:
        return cell
    return Text(_safe(plain), style=cell.style)


def plain_lines(
    columns: Sequence[Col],
    rows: Sequence[Sequence[Text]],
    title: str | None = None,
    caption: str | None = None,
) -> Iterator[Text]:
    """The table as aligned lines of full values, without trailing spaces."""
    heads = [Text(" ".join(c.header.split("\n"))) for c in columns]
    body = [
        [Text(" ").join(cell.split("\n")) if "\n" in cell.plain else cell for cell in row]
        for row in rows
    ]
    widths = [_plain_width([heads[i], *(r[i] for r in body)]) for i in range(len(columns))]
    if title:
        yield Text(title)
    for row in [heads, *body]:
        line = Text()
        end = used = 0  # where this column should end; an overlong value shifts the rest
        for i, (col, cell) in enumerate(zip(columns, row, strict=True)):
            if i:
                line.append(GAP)
                used += len(GAP)
            end += widths[i] + (len(GAP) if i else 0)
            width = cell_len(cell.plain)
            pad = " " * max(0, end - used - width)
            line.append_text(Text(pad) + cell if col.justify == "right" else cell + Text(pad))
            used += len(pad) + width
        line.rstrip()
        yield line
    if caption:
        yield Text(caption)


def _plain_width(cells: Sequence[Text]) -> int:
    """The header's width, or the widest value up to :data:`PAD_LIMIT` if wider."""
    fitting = [cell_len(c.plain) for c in cells[1:] if cell_len(c.plain) <= PAD_LIMIT]
    return max([cell_len(cells[0].plain), *fitting])


def _longest_word(text: Text) -> int:
    return max((cell_len(w) for w in text.plain.split()), default=0)


def _longest_line(text: Text) -> int:
    return max((cell_len(line) for line in text.plain.split("\n")), default=0)


def fit_widths(least: Sequence[int], most: Sequence[int], room: int) -> list[int]:
    """Column widths within ``room``: the widest column gives way first, none below ``least``.

    As if the widest (the first of equals) lost a character at a time; computed at once
    (the level ``top`` no column stays above), so a wide table costs columns x log width.
    """
    widths = list(most)
    if sum(widths) <= room:
        return widths

    def total(top: int) -> int:
        return sum(max(lo, min(w, top)) for lo, w in zip(least, widths, strict=True))

    if total(0) > room:  # cannot fit: every column at its least
        return [max(lo, min(w, lo)) for lo, w in zip(least, widths, strict=True)]
    low, high = 0, max(widths)  # total(high) > room >= total(low)
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (mid, high) if total(mid) <= room else (low, mid)
    fitted = [max(lo, min(w, low)) for lo, w in zip(least, widths, strict=True)]
    spare = room - sum(fitted)  # columns at ``low`` that may keep one more: the last ones
    for i in reversed(range(len(widths))):
        if spare <= 0:
            break
        if fitted[i] == low and widths[i] > low and least[i] <= low:
            fitted[i] += 1
            spare -= 1
    return fitted


def _print_rich(
    console: Console,
    columns: Sequence[Col],
    rows: Sequence[Sequence[Text]],
    title: str | None,
    caption: str | None,
) -> None:
    from rich.table import Table

    heads = [Text(c.header) for c in columns]
    least = [
        max(_longest_word(t) for t in [heads[i], *(r[i] for r in rows)])
        for i in range(len(columns))
    ]
    most = [
        max(_longest_line(t) for t in [heads[i], *(r[i] for r in rows)])
        for i in range(len(columns))
    ]
    frame = 3 * len(columns) + 1  # a border before each column and after the last, padding
    widths = fit_widths(
        least, [max(a, b) for a, b in zip(least, most, strict=True)], console.width - frame
    )
    words = max(_longest_word(Text(t)) for t in (title or "", caption or ""))
    if columns and words > sum(widths) + frame:  # a path in the title is not cut either
        widths[-1] += words - sum(widths) - frame
    table = Table(
        title=Text(title) if title else None,
        caption=Text(caption) if caption else None,
        width=sum(widths) + frame,
    )
    for col, head, width in zip(columns, heads, widths, strict=True):
        table.add_column(head, justify=col.justify, width=width, overflow="fold")
    for row in rows:
        table.add_row(*row)
    console.print(table, crop=False)
