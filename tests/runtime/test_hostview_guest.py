"""A real guest's view of the host: secrets are masked, even for guest root, in one boot."""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from kvmlab.guest.kernel import default_cache_dir
from kvmlab.runtime import hostview
from kvmlab.runtime.hostview import Mask
from tests.runtime.conftest import kvmlab, write_lab

pytestmark = pytest.mark.functional

# Guest root can reach the raw 9p mount in the initramfs through PID 1's root.
RAW = "/proc/1/root/mnt/lower"


@pytest.fixture
def markers() -> Iterator[Path]:
    """Files in /var/tmp (the lab shows /var/tmp and hides some of these again)."""
    base = Path(tempfile.mkdtemp(prefix="kvmlab-hostview-", dir="/var/tmp"))
    (base / "visible.txt").write_text("shown to the guest\n")
    (base / "hidden").mkdir()
    (base / "hidden" / "secret.txt").write_text("host secret\n")
    (base / "hidden-file.txt").write_text("host secret file\n")
    yield base
    shutil.rmtree(base)


def _sections(out: str) -> dict[str, str]:
    """``== NAME`` headed sections of the probe's output."""
    found: dict[str, str] = {}
    for chunk in out.split("== ")[1:]:
        name, _, body = chunk.partition("\n")
        found[name.strip()] = body.strip()
    return found


def test_guest_sees_the_masked_view(run_root: Path, tmp_path: Path, markers: Path) -> None:
    lab = write_lab(
        tmp_path,
        "view",
        (
            "[guests.vm.host_view]\n"
            'show = ["/var/tmp"]\n'
            f'hide = ["{markers / "hidden"}", "{markers / "hidden-file.txt"}"]\n'
        ),
    )
    secrets = [
        p
        for p in ("/etc/shadow", *map(str, Path("/etc/ssh").glob("ssh_host_*_key")))
        if Path(p).is_file() and Path(p).stat().st_size
    ]
    dirs = [
        p
        for p in ("/etc/ssl/private", "/root/.ssh", "/root/.gnupg")
        if Path(p).is_dir() and any(Path(p).iterdir())
    ]
    assert "/etc/shadow" in secrets
    probe = "\n".join(
        [
            'echo "== shadow"; head -c 60 /etc/shadow',
            f'echo "== raw shadow"; head -c 60 {RAW}/etc/shadow',
            f'echo "== raw proc"; ls -A {RAW}/proc | head -n 3',
            f'echo "== raw run root"; ls -A {RAW}{run_root} 2>&1 | head -n 3',
            f'echo "== raw tmp"; ls -A {RAW}/tmp | head -n 3',
            *(f'echo "== file {p}"; wc -c < {p}' for p in secrets),
            *(f'echo "== dir {p}"; ls -A {p}' for p in dirs),
            f'echo "== visible"; cat {markers}/visible.txt',
            f'echo "== hidden"; ls -A {markers}/hidden; cat {markers}/hidden-file.txt',
            f'echo "== cache"; test -d {default_cache_dir()}/images && echo present',
        ]
    )
    up = kvmlab("up", str(lab))
    try:
        assert up.returncode == 0, up.stderr
        seen = kvmlab("exec", "view/vm", "--", "sh", "-c", probe)
        assert seen.returncode == 0, seen.stderr
        out = _sections(seen.stdout)
        assert out["shadow"] == "" and out["raw shadow"] == "", "the host's shadow is masked"
        assert out["raw proc"] == "" and out["raw tmp"] == ""
        assert "No such file" in out["raw run root"]
        for path in secrets:
            assert out[f"file {path}"] == "0", path
        for path in dirs:
            assert out[f"dir {path}"] == "", path
        assert out["visible"] == "shown to the guest", "show lifted the /var/tmp mask"
        assert out["hidden"] == "", "hide masks a directory and a file"
        assert out["cache"] == "present", "the image cache stays visible"

        record = json.loads((run_root / "view" / "vm" / "guest.json").read_text())
        pid = record["pid"]
        assert Path(f"/proc/{pid}/exe").resolve().name.startswith("qemu-system")
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        assert str(run_root / "view" / "vm").encode() in b" ".join(cmdline)

        # What a guest hypervisor does for its own guests: the wrapper works in the guest.
        inner = [
            "sh",
            "-c",
            'v=${2#local,path=}; wc -c < "$v/etc/shadow"; ls -A "$v/proc"',
            "probe",
            "-fsdev",
            "local,path=/",
        ]
        masks = [Mask("/etc/shadow", "file"), Mask("/proc", "dir", 0o555)]
        nested = kvmlab(
            "exec", "view/vm", "--", *hostview.wrap(inner, masks, Path("/run/kvmlab-test"))
        )
        assert (nested.returncode, nested.stdout.strip()) == (0, "0"), nested.stderr
    finally:
        down = kvmlab("down", "view")
        assert down.returncode == 0, down.stderr
