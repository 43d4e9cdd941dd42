"""The kbuild workload: the step's argv, its shell script at L0, and fetching the source."""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import stat
import subprocess
import tarfile
from pathlib import Path

import pytest

from kvmlab.bench.executor import Place
from kvmlab.bench.parsers import ParseError, parse_time_seconds
from kvmlab.bench.suite import SUITES
from kvmlab.bench.workloads.kbuild import (
    BUILD_TIMEOUT,
    SOURCE_PACKAGE,
    TIME,
    kbuild_steps,
    prepare_source,
    source_files,
)
from kvmlab.errors import HostError, ProcessFailure
from kvmlab.guest.kernel import default_cache_dir

needs_time = pytest.mark.skipif(not Path(TIME).is_file(), reason=f"GNU time ({TIME}) missing")


def place(vcpus: int = 2) -> Place:
    return Place("host", "L0", "native", vcpus, None, "127.0.0.1")


def script_of(argv: list[str]) -> str:
    assert argv[:2] == ["sh", "-c"]
    assert len(argv) == 5 and argv[3] == "kbuild"  # the source tree is "$1", never script
    return argv[2]


# --- the step -------------------------------------------------------------------------------


def test_one_step_timed_by_gnu_time() -> None:
    (step,) = kbuild_steps(place(4), SUITES["full"], Path("/cache/kbuild/lua/tree"))
    assert step.name == "build"
    assert step.parse is parse_time_seconds
    assert step.keep == ("elapsed_s",)
    assert step.timeout == BUILD_TIMEOUT == 1800
    assert step.server is None
    assert not step.scratch  # the script makes and removes its own scratch dir
    script = script_of(step.argv)
    assert "make -j4 >&2" in script
    assert f"{TIME} -f '%e %U %S' -o \"$d/time\" make" in script
    assert 'src="$1";' in script and step.argv[4] == "/cache/kbuild/lua/tree"


def test_jobs_follow_vcpus_only() -> None:
    for suite in SUITES.values():
        for vcpus in (1, 2, 16):
            (step,) = kbuild_steps(place(vcpus), suite, Path("/t"))
            assert f"make -j{vcpus} " in script_of(step.argv)


def test_source_path_is_an_argument_not_script() -> None:
    source = Path("/odd dir/it's $HOME/tree")
    argv = kbuild_steps(place(), SUITES["quick"], source)[0].argv
    assert str(source) not in script_of(argv) and argv[4] == str(source)


def test_scratch_is_a_fresh_dir_removed_on_exit() -> None:
    script = script_of(kbuild_steps(place(), SUITES["full"], Path("/t"))[0].argv)
    assert 'd=$(mktemp -d "$base/kvmlab-kbuild.XXXXXX")' in script
    assert "trap 'rm -rf \"$d\"' EXIT" in script
    assert script.index("trap") < script.index("cp -R")


# --- the script, run at L0 with a stand-in tree ---------------------------------------------


def run_step(source: Path, vcpus: int = 2) -> subprocess.CompletedProcess[str]:
    (step,) = kbuild_steps(place(vcpus), SUITES["quick"], source)
    return subprocess.run(step.argv, capture_output=True, text=True, timeout=60, check=False)


def fake_tree(tmp_path: Path, recipe: str) -> Path:
    tree = tmp_path / "tree"
    (tree / "src").mkdir(parents=True)
    (tree / "Makefile").write_text(f"all:\n\t{recipe}\n")
    return tree


@needs_time
def test_script_times_make_and_cleans_up(tmp_path: Path) -> None:
    tree = fake_tree(tmp_path, "@pwd >&2; echo built; touch src/out")
    proc = run_step(tree)
    assert proc.returncode == 0, proc.stderr
    metrics = parse_time_seconds(proc.stdout)
    assert [m.name for m in metrics] == ["elapsed_s", "user_s", "sys_s"]
    assert len(proc.stdout.splitlines()) == 1  # make's own output went to stderr
    workdir = Path(proc.stderr.splitlines()[0])
    assert workdir.name == "tree"
    assert workdir.parent.name.startswith("kvmlab-kbuild.")
    assert not workdir.parent.exists()
    assert not (tree / "src" / "out").exists()  # the build ran in the copy


@needs_time
def test_failed_build_fails_and_cleans_up(tmp_path: Path) -> None:
    proc = run_step(fake_tree(tmp_path, "@pwd >&2; false"))
    assert proc.returncode == 2
    with pytest.raises(ParseError, match="non-zero status 2"):
        parse_time_seconds(proc.stdout)
    assert not Path(proc.stderr.splitlines()[0]).parent.exists()


@needs_time
def test_a_source_path_a_shell_would_split_builds(tmp_path: Path) -> None:
    odd = tmp_path / "odd dir;touch PWNED" / "it's $HOME"
    odd.mkdir(parents=True)
    tree = fake_tree(odd, "@echo built >&2")
    proc = run_step(tree)
    assert proc.returncode == 0, proc.stderr
    assert not list(tmp_path.rglob("PWNED"))


def test_missing_source_says_so(tmp_path: Path) -> None:
    proc = run_step(tmp_path / "absent")
    assert proc.returncode == 1
    assert proc.stdout == ""
    assert "kbuild: no " in proc.stderr


# --- fetching, with a stand-in apt-get -------------------------------------------------------

FAKE_APT = """#!/bin/sh
# Stand-in for apt-get source: --print-uris lists $FAKE_APT_DIR/uris, a download copies
# $FAKE_APT_DIR/files/* here; $FAKE_APT_DIR/fail holds an error line to fail with.
[ -f "$FAKE_APT_DIR/fail" ] && { cat "$FAKE_APT_DIR/fail" >&2; exit 100; }
echo "$@" >> "$FAKE_APT_DIR/calls"
case " $* " in
*" --print-uris "*) cat "$FAKE_APT_DIR/uris" ;;
*" --download-only "*) cp "$FAKE_APT_DIR"/files/* . ;;
*) exit 1 ;;
esac
"""


@pytest.fixture
def apt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fake apt-get on PATH serving lua5.4 5.4.4-1 with a small upstream tarball."""
    root = tmp_path / "apt"
    (root / "bin").mkdir(parents=True)
    (root / "files").mkdir()
    script = root / "bin" / "apt-get"
    script.write_text(FAKE_APT)
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{root / 'bin'}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_APT_DIR", str(root))
    serve(
        root,
        {
            f"{SOURCE_PACKAGE}_5.4.4-1.dsc": b"Format: 3.0 (quilt)\n",
            f"{SOURCE_PACKAGE}_5.4.4.orig.tar.gz": tarball(
                {"lua-5.4.4/Makefile": b"all:\n", "lua-5.4.4/src/lua.c": b"int x;\n"}
            ),
        },
    )
    return root


def tarball(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def serve(root: Path, files: dict[str, bytes], lie: bool = False) -> None:
    """Offer ``files`` for download, listed with their sums (wrong ones if ``lie``)."""
    lines = ["Reading package lists...", "Need to get 1 kB of source archives."]
    for name, data in files.items():
        (root / "files" / name).write_bytes(data)
        digest = hashlib.sha256(b"other" if lie else data).hexdigest()
        lines.append(f"'http://mirror/pool/{name}' {name} {len(data)} SHA256:{digest}")
    (root / "uris").write_text("\n".join(lines) + "\n")


def test_source_files_are_read_from_print_uris(apt: Path) -> None:
    files = source_files(SOURCE_PACKAGE)
    assert [f.name for f in files] == [
        f"{SOURCE_PACKAGE}_5.4.4-1.dsc",
        f"{SOURCE_PACKAGE}_5.4.4.orig.tar.gz",
    ]
    assert all(len(f.sha256) == 64 and f.size > 0 for f in files)


def test_prepare_fetches_verifies_and_unpacks_once(apt: Path, tmp_path: Path) -> None:
    tree = prepare_source(tmp_path / "cache")
    assert tree == tmp_path / "cache" / "kbuild" / f"{SOURCE_PACKAGE}_5.4.4-1" / "tree"
    assert (tree / "Makefile").read_text() == "all:\n"
    assert (tree / "src" / "lua.c").is_file()
    assert prepare_source(tmp_path / "cache") == tree
    calls = (apt / "calls").read_text().splitlines()
    assert sum("--download-only" in c for c in calls) == 1
    assert f"--download-only {SOURCE_PACKAGE}" in calls[1]
    assert [p.name for p in (tmp_path / "cache" / "kbuild").iterdir()] == [tree.parent.name]


def test_a_wrong_checksum_is_refused(apt: Path, tmp_path: Path) -> None:
    serve(
        apt,
        {
            f"{SOURCE_PACKAGE}_5.4.4-1.dsc": b"x\n",
            f"{SOURCE_PACKAGE}_5.4.4.orig.tar.gz": b"not what the index says",
        },
        lie=True,
    )
    with pytest.raises(ProcessFailure, match="Debian's index says"):
        prepare_source(tmp_path / "cache")
    assert list((tmp_path / "cache" / "kbuild").iterdir()) == []  # no partial tree left


def test_unsafe_tarball_is_refused(apt: Path, tmp_path: Path) -> None:
    evil = tarball({"lua/../../evil": b""})
    serve(
        apt, {f"{SOURCE_PACKAGE}_5.4.4-1.dsc": b"x\n", f"{SOURCE_PACKAGE}_5.4.4.orig.tar.gz": evil}
    )
    with pytest.raises(ProcessFailure, match="unsafe member"):
        prepare_source(tmp_path / "cache")


def test_no_deb_src_is_a_host_error_unless_cached(apt: Path, tmp_path: Path) -> None:
    prepare_source(tmp_path / "cache")
    (apt / "fail").write_text("E: You must put some 'deb-src' URIs in your sources.list\n")
    assert prepare_source(tmp_path / "cache").name == "tree"  # the cached tree, offline
    with pytest.raises(HostError) as info:
        prepare_source(tmp_path / "empty")
    assert "deb-src" in str(info.value)
    assert any("deb-src" in line for line in info.value.lines()[1:])  # the fix


# --- the real build at L0 ---------------------------------------------------------------------


@pytest.mark.functional
@needs_time
def test_build_lua_at_l0() -> None:
    """Fetch Debian's lua5.4 source (cached), build it once with the step's argv, parse it."""
    missing = [t for t in ("apt-get", "make", "gcc") if shutil.which(t) is None]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed")
    try:
        source = prepare_source()
    except (HostError, ProcessFailure) as exc:
        pytest.skip(
            f"Debian's {SOURCE_PACKAGE} source cannot be fetched here "
            f"(cache {default_cache_dir() / 'kbuild'}): {exc}"
        )
    (step,) = kbuild_steps(place(os.cpu_count() or 1), SUITES["full"], source)
    proc = subprocess.run(
        step.argv, capture_output=True, text=True, timeout=step.timeout, check=False
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    elapsed = {m.name: m.value for m in step.parse(proc.stdout)}["elapsed_s"]
    assert 0 < elapsed < step.timeout
    assert "lua.o" in proc.stderr  # make's output went to stderr
