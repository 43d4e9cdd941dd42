"""The host view of default-image guests: mask resolution, the QEMU wrapper, the lab key.

The wrapper script itself runs here for real (in a private mount namespace, as root) with a
probe in QEMU's place: fast, and it checks the mounts a guest's 9p export would see.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from kvmlab.errors import HostError, RuntimeFailure, SpecError
from kvmlab.runtime import hostview
from kvmlab.runtime.hostview import Mask
from kvmlab.spec import parse_lab

FSDEV = "local,id=hostfs,path=/,security_model=passthrough,readonly=on,multidevs=remap"
QEMU = ["qemu-system-x86_64", "-name", "vm", "-fsdev", FSDEV, "-device", "virtio-9p-pci"]


def test_wrap_execs_qemu_in_a_private_mount_namespace(tmp_path: Path) -> None:
    masks = [Mask("/etc/shadow", "file"), Mask("/proc", "dir", 0o555)]
    argv = hostview.wrap(QEMU, masks, tmp_path / "run")
    view = str(tmp_path / "run" / hostview.VIEW_DIR)
    # No --fork: unshare execs sh, which execs QEMU, so the pid kvmlab records is QEMU's.
    assert argv[:7] == [
        "unshare",
        "--mount",
        "--propagation",
        "private",
        "--",
        "sh",
        str(hostview.SCRIPT),
    ]
    assert "--fork" not in argv
    assert argv[7:12] == ["", view, str(tmp_path / "run" / hostview.EMPTY_FILE), "f", "/etc/shadow"]
    assert argv[12:16] == ["d", "555", "/proc", "--"]
    assert argv[16:] == [*QEMU[:4], FSDEV.replace("path=/,", f"path={view},"), *QEMU[5:]]
    assert hostview.SCRIPT.read_text().rstrip().endswith('exec "$@"')


def test_wrap_for_a_user_adds_a_user_namespace(tmp_path: Path) -> None:
    argv = hostview.wrap(QEMU, [Mask("/proc", "dir")], tmp_path, user_namespace=True)
    assert argv[:5] == ["unshare", "--user", "--map-root-user", "--mount", "--propagation"]


def test_kept_directories_inside_a_mask_are_bound_back(tmp_path: Path) -> None:
    masks = [Mask("/tmp", "dir", 0o1777)]
    argv = hostview.wrap(QEMU, masks, tmp_path, keep=["/tmp/cache", "/var/cache"])
    start = argv.index(str(hostview.SCRIPT)) + 4
    assert argv[start : argv.index("--", start)] == [
        "w",
        "1777",
        "/tmp",
        "k",
        "/tmp/cache",
        "r",
        "/tmp",
    ]


def test_export_view_needs_exactly_one_share_of_root() -> None:
    with pytest.raises(RuntimeFailure, match="found 0"):
        hostview.export_view(["qemu", "-fsdev", "local,id=x,path=/srv"], "/v")
    with pytest.raises(RuntimeFailure, match="found 2"):
        hostview.export_view(["q", "-fsdev", FSDEV, "-fsdev", FSDEV], "/v")
    assert hostview.export_view(["q", "-fsdev", FSDEV], "/a,b")[2].startswith(
        "local,id=hostfs,path=/a,,b,"
    )


def test_resolve_follows_symlinks_skips_missing_and_prunes(tmp_path: Path) -> None:
    (tmp_path / "secret").mkdir(mode=0o700)
    (tmp_path / "secret" / "key").write_text("k")
    (tmp_path / "link").symlink_to(tmp_path / "secret")
    (tmp_path / "file").write_text("f")
    defaults = [
        str(tmp_path / "link"),
        str(tmp_path / "secret" / "key"),
        str(tmp_path / "missing"),
        "/dev/null",
    ]
    masks = hostview.resolve(defaults, hide=[str(tmp_path / "file")])
    assert masks == [
        Mask(str(tmp_path / "file"), "file"),
        Mask(str(tmp_path / "secret"), "dir", 0o700),
    ]


def test_show_lifts_defaults_not_hides(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    defaults = [str(tmp_path / "a"), str(tmp_path / "b")]
    lifted = hostview.resolve(defaults, hide=[str(tmp_path / "b")], show=[str(tmp_path)])
    assert [m.path for m in lifted] == [str(tmp_path / "b")]
    assert hostview.resolve(defaults, show=["/"]) == []


def test_hide_resolving_to_root_is_refused(tmp_path: Path) -> None:
    (tmp_path / "up").symlink_to("/")
    with pytest.raises(hostview.HostViewError) as info:
        hostview.resolve([], hide=["/etc", str(tmp_path / "up")])
    assert info.value.key == "hide[1]"


def test_defaults_cover_homes_and_kvmlab_state() -> None:
    paths = hostview.default_paths(["/home/u"], ["/run/kvmlab"])
    for path in ("/proc", "/etc/shadow", "/home/u/.ssh", "/home/u/.gnupg", "/run/kvmlab"):
        assert path in paths
    assert "/root" in hostview.home_dirs()


def test_show_everything_leaves_the_argv_alone(tmp_path: Path) -> None:
    assert hostview.restricted(QEMU, tmp_path, show=["/"]) == QEMU
    assert hostview.restricted(QEMU, tmp_path)[0] == "unshare"


@pytest.mark.parametrize(
    ("table", "key", "fragment"),
    [
        ("hide = ['etc/shadow']", "guests.vm.host_view.hide[0]", "absolute"),
        ("show = ['/root/../etc']", "guests.vm.host_view.show[0]", "normalised"),
        ("hide = ['/']", "guests.vm.host_view.hide[0]", "whole root"),
        ("hidden = []", "guests.vm.host_view.hidden", ""),
    ],
)
def test_lab_key_is_validated(table: str, key: str, fragment: str) -> None:
    with pytest.raises(SpecError) as info:
        parse_lab(f'name = "t"\n[guests.vm.host_view]\n{table}\n'.encode(), "t.toml")
    assert any(p.path == key and fragment in p.message for p in info.value.problems), (
        info.value.lines()
    )


def test_lab_key_needs_the_default_image() -> None:
    text = 'name = "t"\n[guests.vm]\nboot = "disk"\ndisks = [{ path = "a.qcow2" }]\n'
    with pytest.raises(SpecError) as info:
        parse_lab(f"{text}host_view = {{ show = ['/'] }}\n".encode(), "t.toml")
    assert [p.path for p in info.value.problems] == ["guests.vm.host_view"]
    lab = parse_lab(b'name = "t"\n[guests.vm.host_view]\nshow = ["/root/.ssh"]\n', "t.toml")
    assert lab.guests["vm"].host_view.show == ["/root/.ssh"]


needs_root = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("unshare") is None, reason="needs root and unshare"
)
PROBE = (
    'v=${2#local,path=}; echo "pid=$$"; head -c 20 "$v/etc/shadow"; echo "|"; '
    'ls -A "$v/proc" | head -n 3; echo "|"; cat "$v$3"; echo "|"; cat "$v$4"; echo "|"; '
    'ls -A "$v$5"; touch "$v$5/new" 2>/dev/null && echo writable; ls -l "$v/etc/shadow"'
)


@needs_root
@pytest.mark.parametrize("busybox", [None, shutil.which("busybox")], ids=["util-linux", "busybox"])
def test_script_masks_the_exported_view_only(tmp_path: Path, busybox: str | None) -> None:
    hidden, kept = tmp_path / "hidden", tmp_path / "cache"
    hidden.mkdir()
    (hidden / "secret").write_text("the secret")
    kept.mkdir()
    (kept / "entry").write_text("the image")
    argv = [
        "sh",
        "-c",
        PROBE,
        "probe",
        "-fsdev",
        "local,path=/",
        str(hidden / "secret"),
        str(kept / "entry"),
        str(hidden),
    ]
    masks = hostview.resolve(["/etc/shadow", "/proc", str(tmp_path)], hide=[str(hidden)])
    wrapped = hostview.wrap(
        argv,
        masks,
        tmp_path / "run",
        keep=[str(kept)],
        busybox=busybox,
        propagation=hostview.root_propagation(),
    )
    proc = subprocess.Popen(wrapped, stdout=subprocess.PIPE, text=True)
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0
    first, listing, secret, entry, rest = out.split("|")
    pid, shadow = first.split("\n", 1)
    assert pid == f"pid={proc.pid}"  # QEMU's pid is the one Popen returned
    assert shadow == ""
    assert listing.strip() == ""
    assert secret.strip() == ""  # inside the masked tmp_path
    assert entry.strip() == "the image"  # the kept directory shows through
    assert "writable" not in rest and "-r--r--r--" in rest
    assert (hidden / "secret").read_text() == "the secret"  # nothing changed on the host
    assert str(tmp_path) not in Path("/proc/self/mountinfo").read_text()


@needs_root
def test_script_refuses_to_start_qemu_when_a_mask_fails(tmp_path: Path) -> None:
    argv = ["sh", "-c", "echo QEMU RAN", "probe", "-fsdev", "local,path=/"]
    wrapped = hostview.wrap(
        argv,
        [Mask(str(tmp_path / "gone"), "dir")],
        tmp_path / "run",
        propagation=hostview.root_propagation(),
    )
    proc = subprocess.run(wrapped, capture_output=True, text=True, timeout=30)
    assert proc.returncode != 0
    assert "QEMU RAN" not in proc.stdout
    assert f"cannot hide {tmp_path / 'gone'} from the guest" in proc.stderr


def test_a_user_without_user_namespaces_is_told_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    monkeypatch.setattr(hostview, "userns_blocked", lambda: None)
    assert hostview.restricted(QEMU, tmp_path)[:3] == ["unshare", "--user", "--map-root-user"]
    monkeypatch.setattr(hostview, "userns_blocked", lambda: "user.max_user_namespaces is 0")
    with pytest.raises(HostError, match="max_user_namespaces") as info:
        hostview.restricted(QEMU, tmp_path)
    assert info.value.exit_code == 4
    assert hostview.restricted(QEMU, tmp_path, show=["/"]) == QEMU


HOST_MOUNTS = (
    "27 1 0:26 / / rw,relatime - ext4 /dev/vda1 rw\n22 27 0:21 / /proc rw - proc proc rw\n"
)
CHROOT_MOUNTS = "97 27 0:46 / /proc rw,relatime - proc proc rw\n"
SHARED_INIT = "27 1 0:26 / / rw,relatime shared:1 - ext4 /dev/vda1 rw\n"


def test_propagation_private_where_root_is_a_mount_unchanged_in_a_private_chroot(
    tmp_path: Path,
) -> None:
    files = {}
    for name, text in (("host", HOST_MOUNTS), ("chroot", CHROOT_MOUNTS), ("shared", SHARED_INIT)):
        files[name] = tmp_path / name
        files[name].write_text(text)
    assert hostview.root_propagation(str(files["host"]), str(files["host"])) == "private"
    # A chroot (the fresh-machine check runs one): "/" is no mount point, nothing is shared.
    assert hostview.root_propagation(str(files["chroot"]), str(files["host"])) == "unchanged"
    with pytest.raises(HostError, match="masks would reach the host"):
        hostview.root_propagation(str(files["chroot"]), str(files["shared"]))
    assert hostview.root_propagation() in ("private", "unchanged")  # this machine


# this machine after `ip netns add` (iproute2 makes /run/netns a shared mount), seen from
# the fresh-machine check's chroot at /tmp/fresh/run
NETNS_INIT = (
    "27 1 254:0 / / rw,relatime - ext4 /dev/vda rw\n"
    "96 27 254:0 /run/netns /run/netns rw,relatime shared:1 - ext4 /dev/vda rw\n"
    "97 27 0:46 / /tmp/fresh/run/proc rw,relatime - proc proc rw\n"
)
SHARED_IN_CHROOT = (
    "97 27 0:46 / /proc rw,relatime - proc proc rw\n"
    "98 27 0:47 / /srv rw,relatime shared:2 - tmpfs t rw\n"
)
CHROOT_HELD_SHARED = (
    "27 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw\n"
    "97 27 0:46 / /tmp/fresh/run/proc rw,relatime - proc proc rw\n"
)


def test_only_shared_mounts_kvmlab_mounts_onto_refuse_a_chroot(tmp_path: Path) -> None:
    files = {}
    for name, text in (
        ("init", NETNS_INIT),
        ("chroot", CHROOT_MOUNTS),
        ("mine", SHARED_IN_CHROOT),
        ("held", CHROOT_HELD_SHARED),
    ):
        files[name] = str(tmp_path / name)
        Path(files[name]).write_text(text)
    targets = ["/root/.kvmlab/run/lab/vm/hostview", "/etc/shadow", "/run", "/root/.ssh"]
    # the host's /run/netns is outside the chroot: nothing kvmlab mounts can reach it
    assert hostview.root_propagation(files["chroot"], files["init"], targets) == "unchanged"
    # a shared mount inside the chroot matters only when kvmlab mounts onto or below it
    assert hostview.root_propagation(files["mine"], files["init"], targets) == "unchanged"
    with pytest.raises(HostError, match=r"shared \(/srv\)"):
        hostview.root_propagation(files["mine"], files["init"], [*targets, "/srv/secret"])
    # the mount holding the chroot is shared: every mask would propagate
    with pytest.raises(HostError, match="masks would reach the host"):
        hostview.root_propagation(files["chroot"], files["held"], targets)
