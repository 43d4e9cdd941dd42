"""A kvmlab installed under /tmp (where a newcomer cloned it) cannot run inside a guest
hypervisor, whose /tmp is its own: a nested lab is refused before anything boots, saying
where kvmlab lies and where to put it; a lab without nested guests is not."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from kvmlab.runtime import nested


def test_an_install_under_tmp_is_named_with_where_to_put_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sys, "prefix", "/tmp/newcomer/.venv")
    why = nested.unseen_install()
    assert why is not None
    assert "/tmp/newcomer/.venv) lies under /tmp" in why and "outside /tmp" in why


def test_this_install_is_seen_unless_it_is_under_a_guest_s_own_dirs() -> None:
    where = str(Path(sys.prefix).resolve())
    hidden = any(where.startswith(d + "/") for d in ("/tmp", "/var/tmp", "/run", "/dev"))
    assert (nested.unseen_install() is None) != hidden
