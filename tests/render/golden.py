"""The golden renderings of every shipped lab, and the command that rewrites them.

Tests only compare; after an intended rendering change, rewrite the files with
``.venv/bin/python -m tests.render.golden`` (or ``make golden``) and review the diff.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from kvmlab.render import Accel, render_libvirt, render_qemu
from kvmlab.spec import LoadedLab, load_lab
from tests.conftest import LAB_FILES, target_for

GOLDEN = Path(__file__).resolve().parent.parent / "golden"
ACCELS: tuple[Accel, ...] = ("tcg", "kvm")


def renderings(loaded: LoadedLab, accel: Accel, fmt: str) -> Iterator[tuple[str, str]]:
    """Each guest of ``loaded`` rendered under ``accel`` as ``fmt`` (qemu or libvirt):
    (golden file name, text)."""
    for path, guest in loaded.lab.walk():
        target = target_for(loaded, path, accel)
        stem = "-".join((loaded.lab.name, *path))
        if fmt == "qemu":
            yield f"{stem}.{accel}.qemu.sh", render_qemu(guest, target).shell()
        else:
            yield f"{stem}.{accel}.xml", render_libvirt(guest, target)


def main() -> None:
    """Rewrite every golden file; print the ones whose text changed."""
    for lab_file in LAB_FILES:
        loaded = load_lab(lab_file)
        for accel in ACCELS:
            for fmt in ("qemu", "libvirt"):
                for name, text in renderings(loaded, accel, fmt):
                    path = GOLDEN / name
                    if not path.exists() or path.read_text() != text:
                        path.write_text(text)
                        print(f"rewrote {path}")


if __name__ == "__main__":
    main()
