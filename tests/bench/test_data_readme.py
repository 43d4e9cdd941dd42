"""data/README.md documents every recorded file, and only files that exist."""

from __future__ import annotations

import re

from tests.bench.recorded import DATA


def test_every_recording_is_documented() -> None:
    readme = (DATA / "README.md").read_text()
    listed = set(re.findall(r"^\| `([^`]+)` \|", readme, re.MULTILINE))
    present = {p.name for p in DATA.iterdir() if p.name != "README.md"}
    assert listed == present
