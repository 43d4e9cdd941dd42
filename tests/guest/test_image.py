"""The image cache (keys, manifests, corruption), the initramfs contents and kernel lookup."""

from __future__ import annotations

import gzip
import lzma
import shutil
import struct
import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest

from kvmlab.guest import elf
from kvmlab.guest.cpio import read_newc
from kvmlab.guest.errors import ImageError
from kvmlab.guest.image import (
    MANIFEST,
    GuestImage,
    cache_key,
    ensure_entry,
    open_image,
    verify_entry,
)
from kvmlab.guest.initramfs import (
    ERROR_PREFIX,
    INIT_FAILED,
    build_initramfs,
    check_static,
    init_script,
    parse_markers,
)
from kvmlab.guest.kernel import extract_vmlinux, parse_meta_depends

DATA = Path(__file__).parent / "data"
INPUTS = {"kernel": "linux-image-6.1.0-56-amd64=6.1.192-2", "init": "abc", "builder": "1"}


class Builder:
    """A build callback that counts its calls and writes two small files."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, dest: Path) -> Mapping[str, str]:
        self.calls += 1
        (dest / "kernel").write_bytes(b"K" * 1000)
        (dest / "initrd.img").write_bytes(b"I" * 500)
        return {"pvh": "yes"}


@pytest.fixture
def images(tmp_path: Path) -> Path:
    """The images section of a fresh cache root."""
    return tmp_path / "cache" / "images"


def test_cache_key_is_stable_and_covers_every_input() -> None:
    assert cache_key(INPUTS) == cache_key(dict(reversed(INPUTS.items())))
    for name in INPUTS:
        assert cache_key({**INPUTS, name: INPUTS[name] + "x"}) != cache_key(INPUTS)


def test_entry_is_built_once_then_reused(images: Path) -> None:
    build = Builder()
    key = cache_key(INPUTS)
    entry, meta = ensure_entry(images, key, INPUTS, build)
    assert meta == {"pvh": "yes"}
    assert ensure_entry(images, key, INPUTS, build) == (entry, meta)
    assert build.calls == 1
    assert sorted(p.name for p in images.iterdir()) == [key]  # no temp dirs left


@pytest.mark.parametrize(
    "damage",
    [
        lambda e: (e / "kernel").write_bytes(b"K" * 999),  # truncated
        lambda e: (e / "initrd.img").write_bytes(b"I" * 499 + b"J"),  # altered
        lambda e: (e / "kernel").unlink(),  # missing
        lambda e: (e / "extra").write_bytes(b""),  # unexpected file
        lambda e: (e / MANIFEST).write_text("{not json"),  # manifest damaged
        lambda e: (e / MANIFEST).unlink(),  # manifest missing
    ],
    ids=["truncated", "altered", "missing", "extra", "bad-manifest", "no-manifest"],
)
def test_damaged_entry_is_detected_and_rebuilt(
    images: Path, damage: Callable[[Path], object]
) -> None:
    build = Builder()
    key = cache_key(INPUTS)
    entry, _ = ensure_entry(images, key, INPUTS, build)
    damage(entry)
    assert verify_entry(entry, key) is None
    assert ensure_entry(images, key, INPUTS, build)[0] == entry
    assert build.calls == 2
    assert verify_entry(entry, key) == {"pvh": "yes"}
    assert (entry / "kernel").read_bytes() == b"K" * 1000


def test_manifest_of_another_key_does_not_verify(images: Path) -> None:
    entry, _ = ensure_entry(images, cache_key(INPUTS), INPUTS, Builder())
    assert verify_entry(entry, "0" * 24) is None


def test_failed_build_leaves_nothing(images: Path) -> None:
    def failing(dest: Path) -> Mapping[str, str]:
        (dest / "kernel").write_bytes(b"half")
        raise ImageError("boom")

    with pytest.raises(ImageError, match="boom"):
        ensure_entry(images, cache_key(INPUTS), INPUTS, failing)
    assert list(images.iterdir()) == []


def test_concurrent_builder_winning_the_race_is_accepted(images: Path) -> None:
    key = cache_key(INPUTS)
    other = Builder()

    def racing(dest: Path) -> Mapping[str, str]:
        ensure_entry(images, key, INPUTS, other)  # another process publishes first
        return Builder()(dest)

    entry, meta = ensure_entry(images, key, INPUTS, racing)
    assert other.calls == 1 and meta == {"pvh": "yes"}
    assert verify_entry(entry, key) is not None


# -- initramfs ----------------------------------------------------------------------------


@pytest.fixture
def fake_modules(tmp_path: Path) -> Path:
    """A modules dir laid out like the recorded kernel's, with placeholder .ko files."""
    root = tmp_path / "lib/modules/6.1.0-56-amd64"
    dep = (DATA / "modules-6.1.0-56-amd64.dep").read_text()
    for line in dep.splitlines():
        path = root / line.split(":")[0]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(f"module {path.name}".encode())
    (root / "modules.dep").write_text(dep)
    return root


@pytest.mark.skipif(shutil.which("busybox") is None, reason="busybox not installed")
def test_initramfs_contents(tmp_path: Path, fake_modules: Path) -> None:
    busybox = Path(shutil.which("busybox") or "")
    out = tmp_path / "initrd.img"

    def build(path: Path) -> None:
        build_initramfs(
            path,
            busybox=busybox,
            modules_dir=fake_modules,
            release="6.1.0-56-amd64",
            groups=["base", "9p", "kvm_amd"],
            init=init_script(),
        )

    build(out)
    entries = {e.name: e for e in read_newc(out.read_bytes())}
    assert entries["init"].data.decode() == init_script()
    assert entries["bin/busybox"].data == busybox.read_bytes()
    assert entries["dev/console"].rdev == (5, 1)
    mods = "lib/modules/6.1.0-56-amd64"
    assert entries[f"{mods}/kernel/fs/9p/9p.ko"].data == b"module 9p.ko"
    assert f"{mods}/kernel/fs/fuse/virtiofs.ko" not in entries  # not asked for
    table = entries["etc/kvmlab/modules"].data.decode()
    assert "kvm_amd kvm_amd" in table.splitlines()
    options = entries["etc/modprobe.d/kvmlab.conf"].data.decode().splitlines()
    assert "options kvm_amd nested=1" in options  # init's modprobe applies them
    dep = entries[f"{mods}/modules.dep"].data.decode()
    assert "kernel/fs/9p/9p.ko: kernel/net/9p/9pnet.ko" in dep and "virtiofs" not in dep
    again = tmp_path / "again.img"
    build(again)
    assert again.read_bytes() == out.read_bytes()  # reproducible, so hashes are meaningful


def test_dynamic_busybox_is_refused() -> None:
    check_static(Path(shutil.which("busybox") or "/bin/busybox"))
    with pytest.raises(ImageError, match="dynamically linked"):
        check_static(Path("/bin/ls"))


@pytest.mark.skipif(shutil.which("busybox") is None, reason="busybox not installed")
def test_init_script_parses_with_busybox_sh(tmp_path: Path) -> None:
    script = tmp_path / "init"
    script.write_text(init_script())
    subprocess.run(["busybox", "sh", "-n", str(script)], check=True, timeout=30)


def test_parse_markers_keeps_first_of_each() -> None:
    console = (
        "noise\r\nkvmlab: init start t=1.92\r\nkvmlab: root mounted t=2.61\n"
        "kvmlab: agent exited rc=1 t=9.5\nkvmlab: root mounted t=9.9\n"
    )
    expected = {"init start": 1.92, "root mounted": 2.61, "agent exited rc=1": 9.5}
    assert parse_markers(console) == expected
    failed = f"{ERROR_PREFIX}mounting 9p share hostfs\nkvmlab: {INIT_FAILED} t=2.34\n"
    assert parse_markers(failed) == {INIT_FAILED: 2.34}


def test_cmdline_adds_per_guest_parameters() -> None:
    image = GuestImage(Path("k"), Path("i"), "console=ttyS0", "9p", "hostfs", "r", "p", "key", True)
    assert image.cmdline() == "console=ttyS0"
    assert image.cmdline(hostname="l1", kvm=True, vhost=True) == (
        "console=ttyS0 kvmlab.hostname=l1 kvmlab.kvm=1 kvmlab.vhost=1"
    )
    assert image.cmdline(hostname="web_1.lab").endswith("kvmlab.hostname=web_1.lab")
    for bad in ("a b", 'x"y', "é", "h" * 65):
        with pytest.raises(ImageError, match="bad hostname"):
            image.cmdline(hostname=bad)


# -- kernel ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("flavour", "package", "release"),
    [
        ("amd64", "linux-image-6.1.0-56-amd64", "6.1.0-56-amd64"),
        ("cloud-amd64", "linux-image-6.1.0-56-cloud-amd64", "6.1.0-56-cloud-amd64"),
    ],
)
def test_meta_package_resolves_to_kernel(flavour: str, package: str, release: str) -> None:
    show = (DATA / f"apt-cache-show-linux-image-{flavour}.txt").read_text()
    assert parse_meta_depends("m", show) == (package, "6.1.192-2", release)


def test_meta_package_without_kernel_dependency_is_an_error() -> None:
    with pytest.raises(ImageError, match="does not depend"):
        parse_meta_depends("m", "Package: m\nDepends: libc6 (>= 2.36)\n")


def _elf_with_notes(*notes: tuple[bytes, int]) -> bytes:
    """A minimal ELF64 header with one PT_NOTE segment holding ``notes``."""
    body = b""
    for name, kind in notes:
        padded = name + b"\0" * (4 - len(name) % 4)
        body += struct.pack("<III", len(name) + 1, 4, kind) + padded + b"\0\0\0\0"
    header = bytearray(64)
    header[:6] = b"\x7fELF\x02\x01"
    struct.pack_into("<Q", header, 0x20, 64)  # e_phoff
    struct.pack_into("<HH", header, 0x36, 56, 1)  # e_phentsize, e_phnum
    phdr = struct.pack("<IIQQQQQQ", elf.PT_NOTE, 0, 120, 0, 0, len(body), len(body), 4)
    return bytes(header) + phdr + body


def _bzimage(payload: bytes) -> bytes:
    setup = bytearray(2 * 512)  # boot sector + 1 setup sector
    setup[0x1F1] = 1
    setup[0x202:0x206] = b"HdrS"
    struct.pack_into("<H", setup, 0x206, 0x20F)
    struct.pack_into("<II", setup, 0x248, 16, len(payload))
    return bytes(setup) + b"\0" * 16 + payload + b"\0\0\0\0"


def test_extract_vmlinux_from_xz_bzimage_with_pvh_note() -> None:
    vmlinux = _elf_with_notes((b"Xen", 5), (b"Xen", elf.XEN_ELFNOTE_PHYS32_ENTRY))
    assert extract_vmlinux(_bzimage(lzma.compress(vmlinux, format=lzma.FORMAT_XZ))) == vmlinux
    assert extract_vmlinux(_bzimage(gzip.compress(vmlinux))) == vmlinux


def test_extract_vmlinux_declines_what_it_cannot_boot() -> None:
    no_pvh = _elf_with_notes((b"Xen", 5), (b"GNU", elf.XEN_ELFNOTE_PHYS32_ENTRY))
    assert extract_vmlinux(_bzimage(lzma.compress(no_pvh, format=lzma.FORMAT_XZ))) is None
    assert extract_vmlinux(_bzimage(b"\x02\x21\x4c\x18" + b"lz4 data")) is None
    assert extract_vmlinux(b"MZ not a bzImage" * 100) is None


def test_open_image_reads_the_manifest_alone(images: Path) -> None:
    meta = {
        "append": "console=ttyS0",
        "share": "9p",
        "share_tag": "hostfs",
        "pvh": "yes",
        "kernel_release": "6.1.0-56-amd64",
        "kernel_package": "p=1",
    }
    key = cache_key(INPUTS)

    def build(dest: Path) -> Mapping[str, str]:
        Builder()(dest)
        return meta

    entry, _ = ensure_entry(images, key, INPUTS, build)
    image = open_image(entry)
    assert (image.kernel, image.initrd) == (entry / "kernel", entry / "initrd.img")
    assert (image.share, image.kernel_release, image.pvh, image.key) == (
        "9p",
        "6.1.0-56-amd64",
        True,
        key,
    )
    (entry / "kernel").write_bytes(b"tampered")
    assert open_image(entry, verify=False).kernel == entry / "kernel"
    with pytest.raises(ImageError, match="does not match"):
        open_image(entry)
    with pytest.raises(ImageError, match="not a guest image"):
        open_image(images)
