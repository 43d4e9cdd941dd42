"""The cache root is checked, deleting in it is confined, and kernels are verified."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pytest

from kvmlab.errors import UsageError
from kvmlab.guest import cache, kernel
from kvmlab.guest import image as image_module
from kvmlab.guest.image import cache_key, ensure_entry, placeholder_image
from kvmlab.guest.kernel import KernelPackage, fetch_kernel, verify_kernel

KEY = cache_key({"k": "v"})
PACKAGE = KernelPackage(
    "generic", "linux-image-amd64", "linux-image-6.1.0-56-amd64", "6.1.192-2", "6.1.0-56-amd64"
)


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``KVMLAB_CACHE`` pointing at a fresh directory."""
    path = tmp_path / "cache"
    monkeypatch.setenv("KVMLAB_CACHE", str(path))
    return path


def test_root_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KVMLAB_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", "/x/cache/")
    assert cache.default_root() == Path("/x/cache/kvmlab")
    monkeypatch.setenv("XDG_CACHE_HOME", "relative")  # ignored, as XDG says
    assert cache.default_root() == Path.home() / ".cache" / "kvmlab"
    monkeypatch.setenv("KVMLAB_CACHE", "relative/cache")
    with pytest.raises(UsageError, match="absolute"):
        cache.default_root()


def test_a_directory_kvmlab_did_not_make_is_refused(tmp_path: Path) -> None:
    foreign = tmp_path / "etc"
    foreign.mkdir()
    (foreign / "passwd").write_text("root:x:0:0\n")
    with pytest.raises(UsageError, match="did not create"):
        cache.section("images", foreign)
    assert sorted(p.name for p in foreign.iterdir()) == ["passwd"]
    with pytest.raises(UsageError, match="other than /"):
        cache.checked_root(Path("/"))


def test_unsafe_roots_are_refused(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    with pytest.raises(UsageError, match="not a symlink"):
        cache.checked_root(tmp_path / "link")
    real.chmod(0o777)
    with pytest.raises(UsageError, match="nobody"):
        cache.checked_root(real)


def test_an_older_kvmlab_cache_is_adopted(tmp_path: Path) -> None:
    old = tmp_path / "old"
    (old / "images").mkdir(parents=True)
    (old / "kernels").mkdir()
    assert cache.checked_root(old) == old
    assert (old / cache.MARKER).is_file()


def test_removal_is_confined_to_entries(root: Path, tmp_path: Path) -> None:
    images = cache.section("images")
    outside = tmp_path / "precious"
    outside.mkdir()
    (outside / "data").write_text("keep me")
    entry = images / KEY
    entry.mkdir()
    (entry / "link").symlink_to(outside)
    cache.remove_entry(entry)  # the symlink inside is removed as a link
    assert not entry.exists() and (outside / "data").read_text() == "keep me"

    (images / "README").mkdir()
    (root / KEY).mkdir()  # a key's name, but not inside a section
    for path in (root, images, images / "README", outside, root / KEY):
        with pytest.raises((UsageError, ValueError)):
            cache.remove_entry(path)
    assert (outside / "data").exists() and root.is_dir() and images.is_dir()

    (images / KEY).symlink_to(outside)  # an entry that is a symlink: only the link goes
    cache.remove_entry(images / KEY)
    assert (outside / "data").read_text() == "keep me"


def test_a_symlinked_section_is_refused(root: Path, tmp_path: Path) -> None:
    cache.checked_root()
    (tmp_path / "elsewhere").mkdir()
    (root / "images").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(UsageError, match="not a directory"):
        cache.clear_section("images")


def test_clear_section_leaves_what_is_not_kvmlab_s(root: Path, tmp_path: Path) -> None:
    images = cache.section("images")
    (images / KEY).mkdir()
    (images / ".tmp-abc123").mkdir()
    (images / "README").write_text("mine")
    (images / "notes").mkdir()
    assert cache.clear_section("images") == ["README", "notes"]
    assert sorted(p.name for p in images.iterdir()) == ["README", "notes"]


def test_image_rebuild_deletes_only_kvmlab_entries(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from kvmlab.cli.image_cmd import run_image

    images = cache.section("images")
    (images / KEY).mkdir()
    (images / "README").write_text("mine")
    monkeypatch.setattr(image_module, "build_default_image", placeholder_image)
    run_image(rebuild=True)
    assert sorted(p.name for p in images.iterdir()) == ["README"]
    assert "left alone: README" in capsys.readouterr().out


def test_bad_entry_symlinked_out_is_unlinked_not_followed(root: Path, tmp_path: Path) -> None:
    images = cache.section("images")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "kernel").write_text("not ours")
    (images / KEY).symlink_to(outside)

    def build(dest: Path) -> Mapping[str, str]:
        (dest / "kernel").write_text("k")
        return {}

    entry, _ = ensure_entry(images, KEY, {"k": "v"}, build)
    assert not entry.is_symlink() and (entry / "kernel").read_text() == "k"
    assert (outside / "kernel").read_text() == "not ours"


class FakeApt:
    """Stands in for apt-get download + dpkg -x + depmod: writes a tiny kernel tree."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, package: KernelPackage, dest: Path) -> None:
        self.calls += 1
        (dest / "boot").mkdir()
        (dest / "boot" / f"vmlinuz-{package.release}").write_bytes(b"bzImage" * 100)
        mods = dest / "lib" / "modules" / package.release
        (mods / "kernel").mkdir(parents=True)
        (mods / "kernel" / "9p.ko").write_bytes(b"module")
        (mods / "modules.dep").write_text("kernel/9p.ko:\n")
        (mods / "build").symlink_to("/usr/src/linux-headers")


@pytest.mark.parametrize(
    "damage",
    ["truncated", "extra", "missing", "relinked", "no-manifest"],
)
def test_corrupt_kernel_is_detected_and_fetched_again(
    root: Path, monkeypatch: pytest.MonkeyPatch, damage: str
) -> None:
    apt = FakeApt()
    monkeypatch.setattr(kernel, "_download_and_unpack", apt)
    first = fetch_kernel(PACKAGE)
    assert verify_kernel(first.root) and apt.calls == 1
    assert fetch_kernel(PACKAGE).root == first.root and apt.calls == 1  # verified, reused
    mods = first.modules_dir
    if damage == "truncated":
        (mods / "kernel" / "9p.ko").write_bytes(b"modul")
    elif damage == "extra":
        (mods / "kernel" / "evil.ko").write_bytes(b"")
    elif damage == "missing":
        first.vmlinuz.unlink()
    elif damage == "relinked":
        (mods / "build").unlink()
        (mods / "build").symlink_to("/etc")
    else:
        (first.root / kernel.MANIFEST).unlink()
    assert not verify_kernel(first.root)
    again = fetch_kernel(PACKAGE)
    assert apt.calls == 2 and again.root == first.root and verify_kernel(again.root)
    assert (again.modules_dir / "kernel" / "9p.ko").read_bytes() == b"module"
    assert sorted(p.name for p in again.root.parent.iterdir()) == [PACKAGE.cache_name]
