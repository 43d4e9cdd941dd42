"""``kvmlab image --cloud-disk PATH``: the path is checked before anything is built (the
default image, then minutes of mmdebstrap), each refusal one line: a directory that does
not exist is never created, a file already there is never written over, a name too long,
a file where a directory should be, a directory that takes no files (``/sys``). Nothing
is built here: the builders are replaced by ones that fail the test if called."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kvmlab.cli import image_cmd
from kvmlab.errors import KvmlabError, UsageError
from kvmlab.guest import diskimage, image
from kvmlab.guest.errors import ImageError

NAME_MAX = os.pathconf("/tmp", "PC_NAME_MAX")


@pytest.fixture(autouse=True)
def nothing_is_built(monkeypatch: pytest.MonkeyPatch) -> None:
    def built(*args: object, **kwargs: object) -> None:
        pytest.fail("an image was built before --cloud-disk was checked")

    monkeypatch.setattr(image, "build_default_image", built)
    monkeypatch.setattr(diskimage, "cached_test_disk_image", built)


def refused(path: Path) -> str:
    with pytest.raises(UsageError) as caught:
        image_cmd.run_image(False, path)
    (line,) = caught.value.lines()
    return line


def test_a_missing_directory_is_refused_not_created(tmp_path: Path) -> None:
    for path in (tmp_path / "new" / "d.qcow2", Path("/proc/x/d.qcow2")):
        assert refused(path) == (
            f"--cloud-disk {path}: directory {path.parent} does not exist; create it first"
        )
    assert not (tmp_path / "new").exists()


def test_a_file_already_there_is_never_written_over(tmp_path: Path) -> None:
    disk = tmp_path / "d.qcow2"
    disk.write_bytes(b"a disk of its own")
    link = tmp_path / "link.qcow2"
    link.symlink_to(tmp_path / "absent")
    for path in (disk, link, Path("/dev/null")):
        assert refused(path) == (
            f"--cloud-disk {path} exists already; kvmlab makes the disk as a new file and "
            "writes over nothing: give a new name"
        )
    assert disk.read_bytes() == b"a disk of its own"
    assert link.is_symlink() and not (tmp_path / "absent").exists()


def test_a_directory_is_refused_with_a_name_in_it(tmp_path: Path) -> None:
    assert refused(tmp_path) == (
        f"--cloud-disk {tmp_path} is a directory; give a file name in it, e.g. "
        f"{tmp_path / 'disk.qcow2'}"
    )


def test_a_path_that_cannot_be_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    assert refused(tmp_path / "file" / "d.qcow2") == (
        f"--cloud-disk {tmp_path / 'file' / 'd.qcow2'}: a part of it is a file, not a directory"
    )
    long = tmp_path / ("x" * 300 + ".qcow2")
    assert refused(long) == (
        f"--cloud-disk {long}: a name in it is longer than the filesystem allows; "
        "give a shorter name"
    )


def test_a_directory_that_takes_no_files_is_refused_before_building(tmp_path: Path) -> None:
    place = Path("/sys/kernel/d.qcow2")  # sysfs: no file can be made there, even by root
    if not place.parent.is_dir():
        pytest.skip("no /sys here")
    line = refused(place)
    assert line.startswith(f"--cloud-disk {place}: cannot create files in /sys/kernel (")
    assert line.endswith("); give a path in a directory you can write")
    assert not place.exists()


def test_the_longest_name_the_filesystem_takes_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The temporary file beside it has a short name of its own, so any name works."""
    base = tmp_path / "base.qcow2"
    base.write_bytes(b"")
    monkeypatch.setattr(diskimage, "cached_test_disk_image", lambda cache_dir=None: base)

    def qemu_img(argv: list[str], what: str, timeout: float) -> str:
        Path(argv[-1]).write_bytes(b"QFI\xfb overlay")
        return ""

    monkeypatch.setattr(diskimage, "_tool", qemu_img)
    dest = tmp_path / ("x" * (NAME_MAX - 6) + ".qcow2")
    image_cmd.check_cloud_disk(dest)
    assert diskimage.build_test_disk_image(dest) == dest
    assert dest.read_bytes() == b"QFI\xfb overlay"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["base.qcow2", dest.name])


def test_a_file_that_appears_while_building_is_not_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = tmp_path / "base.qcow2"
    base.write_bytes(b"")
    dest = tmp_path / "d.qcow2"
    monkeypatch.setattr(diskimage, "cached_test_disk_image", lambda cache_dir=None: base)

    def qemu_img(argv: list[str], what: str, timeout: float) -> str:
        Path(argv[-1]).write_bytes(b"overlay")
        dest.write_bytes(b"someone else's")  # appeared meanwhile
        return ""

    monkeypatch.setattr(diskimage, "_tool", qemu_img)
    with pytest.raises(ImageError) as caught:
        diskimage.build_test_disk_image(dest)
    assert caught.value.lines() == [
        f"{dest} appeared while the disk was made; kvmlab makes the disk as a new file and "
        "writes over nothing: give a new name"
    ]
    assert dest.read_bytes() == b"someone else's"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["base.qcow2", "d.qcow2"]


def test_a_directory_gone_while_building_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = tmp_path / "base.qcow2"
    base.write_bytes(b"")
    monkeypatch.setattr(diskimage, "cached_test_disk_image", lambda cache_dir=None: base)
    dest = tmp_path / "gone" / "d.qcow2"
    with pytest.raises(KvmlabError) as caught:
        diskimage.build_test_disk_image(dest)
    (line,) = caught.value.lines()
    assert line == (
        f"cannot write the disk {dest}: No such file or directory; give a path in a "
        "directory you can write"
    )
    assert not (tmp_path / "gone").exists(), "never created"
