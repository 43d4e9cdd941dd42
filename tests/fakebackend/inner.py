"""``kvmlab`` as a stub guest runs it: this kvmlab, with the stub backend registered and
the guests it starts (``up --within``) stub guests too (``python -m
tests.fakebackend.inner ARGS``, what :class:`~tests.fakebackend.machine.StubAgent` runs
for ``kvmlab ARGS``)."""

from __future__ import annotations

import sys

from kvmlab.cli.main import main
from kvmlab.runtime import backends
from tests import fakebackend


def run(args: list[str]) -> None:
    """The kvmlab command ``args``, inside a stub guest."""
    backends.register(fakebackend.KIND)  # the stub's one registration line, in here too
    if args[:1] == ["up"]:
        args = [*args, "--backend", fakebackend.NAME]
    sys.argv = ["kvmlab", *args]
    main()


if __name__ == "__main__":
    run(sys.argv[1:])
