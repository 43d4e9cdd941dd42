"""A migration's destination sockets sit one directory deeper than the guest's: a run
directory that just fits the guest is refused for the migration before anything starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvmlab.errors import StateError
from kvmlab.migrate.transports.qmp import check_destination_sockets


def test_a_destination_too_deep_for_its_sockets_is_refused() -> None:
    deep = Path("/r" + "x" * 80, "lab", "vm", ".migration-1")
    with pytest.raises(StateError) as got:
        check_destination_sockets("lab/vm", deep)
    message = str(got.value)
    assert message.startswith("cannot migrate lab/vm: its destination's socket /r")
    assert "would be 115 bytes long, and a unix socket path takes at most 107" in message
    assert "KVMLAB_RUN_DIR 8 bytes shorter" in message


def test_a_destination_that_fits_passes() -> None:
    check_destination_sockets("lab/vm", Path("/run/kvmlab/lab/vm/.migration-1"))
