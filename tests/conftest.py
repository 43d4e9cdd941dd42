"""Shared test helpers: the shipped labs and targets to render them for."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvmlab.render import Accel, BootImage, Target
from kvmlab.spec import LoadedLab, load_lab

ROOT = Path(__file__).resolve().parent.parent
LABS = ROOT / "labs"
LAB_FILES = sorted(LABS.glob("*.toml"))


def lab_ids() -> list[str]:
    """Test ids: the lab file stems."""
    return [p.stem for p in LAB_FILES]


FAKE_IMAGE = BootImage(
    kernel=Path("/cache/images/KEY/kernel"),
    initrd=Path("/cache/images/KEY/initrd.img"),
    append="console=ttyS0 quiet panic=-1 kvmlab.share=9p kvmlab.tag=hostfs",
    share="9p",
    share_tag="hostfs",
)


def target_for(
    loaded: LoadedLab,
    path: tuple[str, ...],
    accel: Accel = "tcg",
    run_dir: Path | None = None,
    lab_dir: Path | None = None,
    image: BootImage = FAKE_IMAGE,
) -> Target:
    """A deterministic target: fixed run dir, reason and (fake) default image unless given."""
    return Target(
        image=image,
        lab=loaded.lab.name,
        address=path,
        lab_dir=lab_dir or Path("/labs"),
        run_dir=run_dir or Path("/run/kvmlab").joinpath(loaded.lab.name, *path),
        auto_accel=accel,
        auto_reason="test host" if accel == "tcg" else "test host with usable KVM",
    )


@pytest.fixture(params=LAB_FILES, ids=lab_ids())
def shipped_lab(request: pytest.FixtureRequest) -> LoadedLab:
    """Each lab in labs/, loaded."""
    path: Path = request.param
    return load_lab(path)
