"""The ``kbuild`` workload: the wall-clock time of a parallel build of a fixed C code base.

The nested-paging talk timed kernel builds at L0, L1 and L2; a kernel build takes hours in a TCG
guest, so this builds a real but small code base instead: Lua 5.4's upstream source
(34 C files, ~30k lines), the ``orig`` tarball of Debian's ``lua5.4`` source package,
with its own Makefile (``make -j<vCPUs>``, gcc, no configure step). Measured on a 2-core
host: 2.6 s at L0 and 46 s in a 2-vCPU TCG guest (medians of 3, nothing else running).

The tree is fetched once with ``apt-get source --download-only`` (which needs a
``deb-src`` entry for Debian's archive and ``apt-get update``, not dpkg-dev), checked
against the SHA-256 sums of Debian's signed index and unpacked under the kvmlab cache,
keyed by the source package version. Guests of the default image see the host's root,
so the same path is read at every level; each repetition copies it to a fresh scratch
directory on tmpfs, builds it under GNU time and removes it.
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import shutil
import subprocess
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from kvmlab.bench.parsers.timing import parse_time_seconds
from kvmlab.bench.registry import LevelWorkload, Settings, Step, register
from kvmlab.errors import HostError, ProcessFailure, ToolMissing
from kvmlab.guest.kernel import default_cache_dir

if TYPE_CHECKING:
    from kvmlab.bench.executor import Place

SOURCE_PACKAGE = "lua5.4"
"""The Debian source package whose upstream (``orig``) tarball is built."""

BUILD_TIMEOUT = 1800.0
"""Seconds one build may take (a TCG guest needs under a minute)."""

APT_TIMEOUT = 600.0
"""Seconds an apt-get call may take."""

TIME = "/usr/bin/time"
"""GNU time (Debian package ``time``); busybox and the shells' ``time`` lack ``-o``."""

DEB_SRC_FIX = (
    "add a deb-src entry for Debian's archive to /etc/apt/sources.list.d/ and run "
    "apt-get update (`make deps` does both)"
)

_URI_LINE = re.compile(
    r"^'(?P<uri>[^']+)' (?P<name>\S+) (?P<size>\d+) SHA256:(?P<sha>[0-9a-f]{64})$"
)


@dataclass(frozen=True)
class SourceFile:
    """One file of a source package as Debian's index lists it."""

    name: str
    size: int
    sha256: str


def prepare_source(cache_dir: Path | None = None) -> Path:
    """The unpacked upstream tree of :data:`SOURCE_PACKAGE`, fetched and verified on first use.

    The tree lives in ``<cache>/kbuild/<package>_<version>/tree``. When apt knows no
    source package (no ``deb-src`` entry) a tree cached before is used, else
    :class:`~kvmlab.errors.HostError` says how to add one.
    """
    root = (cache_dir or default_cache_dir()) / "kbuild"
    try:
        files = source_files(SOURCE_PACKAGE)
    except HostError:
        cached = sorted(
            root.glob(f"{SOURCE_PACKAGE}_*/tree/Makefile"), key=lambda p: p.stat().st_mtime
        )
        if cached:
            return cached[-1].parent
        raise
    dsc = next((f for f in files if f.name.endswith(".dsc")), None)
    orig = next((f for f in files if re.search(r"\.orig\.tar\.(gz|xz|bz2)$", f.name)), None)
    if dsc is None or orig is None:
        raise ProcessFailure(
            f"Debian's {SOURCE_PACKAGE} source package has no .dsc or orig "
            f"tarball: {', '.join(f.name for f in files)}",
            _print_uris(SOURCE_PACKAGE),
            None,
        )
    final = root / dsc.name.removesuffix(".dsc")
    tree = final / "tree"
    if (tree / "Makefile").is_file():
        return tree
    fetch = ["apt-get", "-q", "source", "--download-only", SOURCE_PACKAGE]
    try:
        root.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix=".partial-", dir=root))
    except OSError as exc:
        raise ProcessFailure(f"cannot write the kbuild cache: {exc}", fetch, None) from exc
    try:
        _apt(fetch, cwd=work)
        for f in files:  # apt checks them too; this also pins them to the key
            _verify(work / f.name, f, fetch)
        _unpack(work / orig.name, work / "tree", fetch)
        if not (work / "tree" / "Makefile").is_file():
            raise ProcessFailure(f"{orig.name} holds no top-level Makefile", fetch, None)
        try:
            work.rename(final)
        except OSError as exc:
            if not (tree / "Makefile").is_file():  # else a concurrent prepare won the race
                raise ProcessFailure(f"cannot write the kbuild cache: {exc}", fetch, None) from exc
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return tree


def source_files(package: str) -> list[SourceFile]:
    """The files of ``package``'s candidate source version, from apt's (signed) index."""
    out = _apt(_print_uris(package))
    files = [
        SourceFile(m["name"], int(m["size"]), m["sha"])
        for m in map(_URI_LINE.match, out.splitlines())
        if m
    ]
    if not files:
        raise ProcessFailure(
            f"apt-get listed no files for source package {package}",
            _print_uris(package),
            0,
            out.splitlines()[-8:],
        )
    return files


def kbuild_steps(place: Place, s: Settings, source: Path) -> list[Step]:
    """One ``build`` step: copy ``source`` to a scratch dir, time ``make -j<vCPUs>``, remove it.

    The same in every suite (``s`` is unused): one build is the repetition.

    The scratch dir is a fresh ``mktemp -d`` on /dev/shm (tmpfs at every level; $TMPDIR or
    /tmp where it is missing). make's output goes to stderr; stdout is GNU time's
    ``ELAPSED USER SYS`` line only, which :func:`parse_time_seconds` reads (it fails on
    GNU time's "Command exited with non-zero status" line, as the exit status does).
    """
    script = "; ".join(
        [
            "set -eu",
            'src="$1"',
            '[ -f "$src/Makefile" ] || { echo "kbuild: no $src/Makefile here" >&2; exit 1; }',
            'base=/dev/shm; [ -d "$base" ] && [ -w "$base" ] || base="${TMPDIR:-/tmp}"',
            'd=$(mktemp -d "$base/kvmlab-kbuild.XXXXXX")',
            "trap 'rm -rf \"$d\"' EXIT",
            'cp -R "$src" "$d/tree"',
            'cd "$d/tree"',
            # a make that started kvmlab must not steer this one
            "unset MAKEFLAGS MFLAGS MAKELEVEL",
            "rc=0",
            f"{TIME} -f '%e %U %S' -o \"$d/time\" make -j{place.vcpus} >&2 || rc=$?",
            'cat "$d/time"',
            'exit "$rc"',
        ]
    )
    note = f"{source.parent.name}: upstream tree of Debian's source package, make -j{place.vcpus}"
    return [
        Step(
            "build",
            ["sh", "-c", script, "kbuild", str(source)],
            parse_time_seconds,
            BUILD_TIMEOUT,
            keep=("elapsed_s",),
            notes=(note,),
        )
    ]


def steps(place: Place, s: Settings) -> list[Step]:
    """The build of the source tree, fetched and verified on first use."""
    return kbuild_steps(place, s, prepare_source())


register(
    LevelWorkload("kbuild", order=60, steps=steps, metrics=("build_elapsed_s",), suites=("full",))
)


def _print_uris(package: str) -> list[str]:
    return ["apt-get", "-q", "source", "--print-uris", package]


def _apt(argv: list[str], cwd: Path | None = None) -> str:
    """Run an apt command; its stdout, or a kvmlab error."""
    env = {**os.environ, "LC_ALL": "C"}
    try:
        proc = subprocess.run(
            argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=APT_TIMEOUT, check=False
        )
    except FileNotFoundError as exc:
        raise ToolMissing(argv[0], "a Debian-based host (apt)") from exc
    except subprocess.TimeoutExpired as exc:
        raise ProcessFailure(
            f"{shlex.join(argv)} timed out after {APT_TIMEOUT:g} s", argv, None
        ) from exc
    if proc.returncode != 0:
        if "deb-src" in proc.stderr or "Unable to find a source package" in proc.stderr:
            raise HostError(
                f"apt finds no source package: {proc.stderr.strip().splitlines()[-1]}",
                [DEB_SRC_FIX],
            )
        raise ProcessFailure(
            f"{shlex.join(argv)} failed",
            argv,
            proc.returncode,
            (proc.stderr or proc.stdout).splitlines()[-8:],
        )
    return proc.stdout


def _verify(path: Path, expected: SourceFile, fetch: list[str]) -> None:
    """Fail unless ``path`` has the size and SHA-256 sum of Debian's index."""
    digest = hashlib.sha256()
    try:
        with path.open("rb") as fh:
            while chunk := fh.read(1 << 20):
                digest.update(chunk)
        size = path.stat().st_size
    except OSError as exc:
        raise ProcessFailure(
            f"apt-get did not download {expected.name}: {exc}", fetch, None
        ) from exc
    if size != expected.size or digest.hexdigest() != expected.sha256:
        raise ProcessFailure(
            f"{expected.name}: size {size}, sha256 {digest.hexdigest()}; "
            f"Debian's index says {expected.size}, {expected.sha256}",
            fetch,
            None,
        )


def _unpack(archive: Path, dest: Path, fetch: list[str]) -> None:
    """Extract ``archive`` into ``dest`` without its top-level directory (plain files only)."""
    try:
        with tarfile.open(archive) as tar:
            members = []
            for member in tar.getmembers():
                parts = PurePosixPath(member.name).parts
                if member.name.startswith("/") or ".." in parts:
                    raise ProcessFailure(
                        f"{archive.name}: unsafe member {member.name}", fetch, None
                    )
                if len(parts) < 2 or not (member.isfile() or member.isdir()):
                    continue
                member.name = "/".join(parts[1:])
                members.append(member)
            dest.mkdir()
            if hasattr(tarfile, "data_filter"):
                tar.extractall(dest, members=members, filter="data")
            else:  # Python < 3.11.4: the members are checked above
                tar.extractall(dest, members=members)
    except (OSError, tarfile.TarError) as exc:
        raise ProcessFailure(f"unpacking {archive.name}: {exc}", fetch, None) from exc
