"""What a default-image guest sees of the host: the host root, with secrets masked.

The default image mounts the host's root over 9p, served by QEMU. Masking inside the guest
would not help (guest root can undo it), so the view is restricted on the host side: QEMU
starts in a private mount namespace where ``/`` is bind-mounted recursively onto
``RUN_DIR/hostview``, masks are mounted over that copy (an empty read-only tmpfs over a
directory, an empty read-only file over a file) and QEMU exports the copy instead of ``/``.
QEMU itself keeps the whole host (its run directory, disks, sockets), and no mount is made
outside the namespace, which ends with QEMU.

Masked by default (only what exists; symlinks resolved, so the mask lands on the target):
the host's live state (``/proc``, ``/sys``, ``/dev``, ``/run``, ``/tmp``, ``/var/tmp``:
the guest mounts its own), password hashes and system keys (:data:`SECRET_FILES`,
:data:`SECRET_DIRS`, ssh host private keys), every home's keys and credentials
(:data:`HOME_SECRETS`) and kvmlab's run root and results; the image cache stays visible
(a guest hypervisor boots its guests from it), even below a mask. A lab widens or narrows
this per guest with ``host_view.show`` and ``host_view.hide``.

The wrapper ``unshare --mount -- sh hostview.sh ... -- QEMU-ARGV`` execs without forking
and the script ends in ``exec``, so the pid kvmlab records is QEMU's. If a mask cannot be
mounted the script exits before QEMU starts: a guest never runs with an unmasked view.
kvmlab as a non-root user adds ``--user --map-root-user`` (the only way such a user can
mount); QEMU then runs as root of that user namespace and the guest sees your files as
owned by root and other users' as ``nobody``. Where a sysctl forbids user namespaces such a
guest is refused (exit 4) unless its lab shows it the whole root (``show = ["/"]``).
Masks are made with busybox's ``mount`` when there is one: under TCG (a guest hypervisor
starting its guests) the 13 default masks take 0.6 s that way against 3.3 s with
util-linux's.
"""

from __future__ import annotations

import os
import pwd
import shutil
import stat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from kvmlab.errors import HostError, KvmlabError, RuntimeFailure, ToolMissing

if TYPE_CHECKING:
    from kvmlab.render.target import Target
    from kvmlab.spec import Guest, LoadedLab

VIEW_DIR = "hostview"
"""Below the guest's run directory: where the masked copy of ``/`` is mounted."""
EMPTY_FILE = "hostview.empty"
"""Below the guest's run directory: the empty file bind-mounted over secret files."""

LIVE_DIRS = ("/proc", "/sys", "/dev", "/run", "/tmp", "/var/tmp")
SECRET_FILES = (
    "/etc/shadow",
    "/etc/shadow-",
    "/etc/gshadow",
    "/etc/gshadow-",
    "/etc/security/opasswd",
    "/etc/krb5.keytab",
    "/var/backups/shadow.bak",
    "/var/backups/gshadow.bak",
)
SECRET_GLOBS = ("/etc/ssh/ssh_host_*_key",)
SECRET_DIRS = (
    "/etc/ssl/private",
    "/etc/wireguard",
    "/etc/NetworkManager/system-connections",
    "/etc/libvirt/secrets",
    "/var/lib/libvirt/secrets",
)
HOME_SECRETS = (
    ".ssh",
    ".gnupg",
    ".password-store",
    ".local/share/keyrings",
    ".aws",
    ".azure",
    ".config/gcloud",
    ".config/gh",
    ".kube",
    ".docker",
    ".netrc",
    ".npmrc",
    ".pypirc",
    ".git-credentials",
    ".pgpass",
    ".vault-token",
)
"""Relative to every home directory in the password database (and ``$HOME``)."""

SCRIPT = Path(__file__).with_name("hostview.sh")
"""``sh hostview.sh BUSYBOX VIEW EMPTY [MASK]... -- QEMU-ARGV``: mounts the view, execs QEMU."""


class HostViewError(KvmlabError):
    """A ``host_view`` entry cannot be applied on this host (the entry's index says which)."""

    exit_code = 2

    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key
        self.message = message


@dataclass(frozen=True)
class Mask:
    """One path hidden from the guest: a resolved, existing directory or file."""

    path: str
    kind: Literal["dir", "file"]
    mode: int = 0o755  # a directory mask keeps the directory's permission bits


def home_dirs() -> list[str]:
    """Every home directory of the password database, ``$HOME`` and ``/root``."""
    homes = {p.pw_dir for p in pwd.getpwall()} | {str(Path.home()), "/root"}
    return sorted(h for h in homes if h.startswith("/"))


def default_paths(homes: Iterable[str], state: Iterable[str] = ()) -> list[str]:
    """The paths masked unless shown (``state``: kvmlab's own run root and results)."""
    paths = [*LIVE_DIRS, *SECRET_FILES, *SECRET_DIRS, *state]
    for pattern in SECRET_GLOBS:
        top, _, rest = pattern.rpartition("/")
        paths.extend(sorted(str(p) for p in Path(top).glob(rest)))
    for home in homes:
        paths.extend(str(Path(home, rel)) for rel in HOME_SECRETS)
    return paths


def _below(path: str, top: str) -> bool:
    """Whether ``path`` is ``top`` or inside it (both absolute and normalised)."""
    return top == "/" or path == top or path.startswith(top + "/")


def _mask(path: str) -> Mask | None:
    """The mask for ``path`` after resolving symlinks, or None if nothing is there."""
    real = os.path.realpath(path)
    try:
        info = Path(real).lstat()
    except OSError:
        return None
    if stat.S_ISDIR(info.st_mode):
        return Mask(real, "dir", stat.S_IMODE(info.st_mode))
    if stat.S_ISREG(info.st_mode):
        return Mask(real, "file")
    return None  # devices, sockets, fifos: no content to hide


def resolve(
    defaults: Iterable[str], hide: Sequence[str] = (), show: Sequence[str] = ()
) -> list[Mask]:
    """The masks to mount: defaults not lifted by ``show`` plus ``hide``, each resolved.

    ``show`` lifts a default whose path (as listed or resolved) lies at or below one of
    its entries; ``hide`` always applies. A mask inside a masked directory is dropped.
    """
    found: dict[str, Mask] = {}
    for path in defaults:
        mask = _mask(path)
        if mask is not None and not any(_below(p, s) for s in show for p in (path, mask.path)):
            found.setdefault(mask.path, mask)
    for i, path in enumerate(hide):
        mask = _mask(path)
        if mask is not None and mask.path == "/":
            raise HostViewError(f"hide[{i}]", f"{path} resolves to /: that hides the whole root")
        if mask is not None:
            found[mask.path] = mask
    kept: list[Mask] = []
    for mask in sorted(found.values(), key=lambda m: (m.path.count("/"), m.path)):
        if not any(k.kind == "dir" and _below(mask.path, k.path) for k in kept):
            kept.append(mask)
    return sorted(kept, key=lambda m: m.path)


def wrap(
    argv: Sequence[str],
    masks: Sequence[Mask],
    run_dir: Path,
    keep: Sequence[str] = (),
    *,
    user_namespace: bool = False,
    busybox: str | None = None,
    propagation: Literal["private", "unchanged"] = "private",
) -> list[str]:
    """``argv`` (a QEMU command line sharing ``/`` over 9p) exporting the masked view.

    ``keep``: resolved directories that stay visible even inside a masked directory.
    ``busybox``: run its ``mount`` and ``mkdir`` instead of util-linux's and coreutils'
    (under TCG, in a guest hypervisor, that is ~0.1 s less per command). Pure: nothing
    is checked or mounted here.
    """
    view = str(run_dir / VIEW_DIR)
    qemu = export_view(argv, view)
    args: list[str] = []
    for mask in masks:
        if mask.kind == "file":
            args += ["f", mask.path]
            continue
        inside = [p for p in keep if p != mask.path and _below(p, mask.path)]
        if not inside:
            args += ["d", f"{mask.mode:o}", mask.path]
            continue
        args += ["w", f"{mask.mode:o}", mask.path]
        for path in inside:
            args += ["k", path]
        args += ["r", mask.path]
    userns = ["--user", "--map-root-user"] if user_namespace else []
    return [
        "unshare",
        *userns,
        "--mount",
        "--propagation",
        propagation,
        "--",
        "sh",
        str(SCRIPT),
        busybox or "",
        view,
        str(run_dir / EMPTY_FILE),
        *args,
        "--",
        *qemu,
    ]


def export_view(argv: Sequence[str], view: str) -> list[str]:
    """``argv`` with its 9p ``-fsdev local,...,path=/`` exporting ``view`` instead."""
    out = list(argv)
    changed = 0
    for i in range(1, len(out)):
        if out[i - 1] != "-fsdev" or not out[i].startswith("local,"):
            continue
        opts = out[i].split(",")
        if "path=/" in opts:
            opts[opts.index("path=/")] = "path=" + view.replace(",", ",,")
            out[i] = ",".join(opts)
            changed += 1
    if changed != 1:
        raise RuntimeFailure(
            f"cannot restrict the host view: expected one 9p export of / in "
            f"the QEMU command line, found {changed}"
        )
    return out


def kvmlab_state() -> list[str]:
    """kvmlab's own state a guest has no business reading: the run root and the results."""
    from kvmlab.paths import run_root
    from kvmlab.results.store import default_results_path

    results = default_results_path()
    state = [str(run_root()), *(f"{results}{end}" for end in ("", "-wal", "-shm", "-journal"))]
    if results.parent.name == "kvmlab":  # the default data directory is kvmlab's alone
        state.append(str(results.parent))
    return state


def restricted(
    argv: Sequence[str],
    run_dir: Path,
    hide: Sequence[str] = (),
    show: Sequence[str] = (),
    keep: Sequence[Path] = (),
) -> list[str]:
    """The QEMU argv of a guest sharing the host root, exporting this host's masked view.

    ``argv`` comes back unchanged only when ``show`` lifts every mask and nothing is
    hidden. ``keep``: directories the guest must still see (the image cache).
    """
    masks = resolve(default_paths(home_dirs(), kvmlab_state()), hide, show)
    if not masks:
        return list(argv)
    if shutil.which("unshare") is None:
        raise ToolMissing("unshare", "apt-get install util-linux")
    user = os.geteuid() != 0
    if user and (why := userns_blocked()):
        raise HostError(
            f"cannot hide the host's secrets from the guest: as a user kvmlab needs a user "
            f"namespace, and {why}",
            fix=[
                "run kvmlab as root",
                f"or allow user namespaces ({why})",
                'or share the whole host root: host_view = { show = ["/"] } on the guest',
            ],
        )
    kept: list[str] = []
    for path in sorted({os.path.realpath(p) for p in keep if p.is_dir()}):
        if not any(_below(path, k) for k in kept):
            kept.append(path)
    targets = [str(run_dir / VIEW_DIR), *(m.path for m in masks), *kept]
    return wrap(
        argv,
        masks,
        run_dir,
        kept,
        user_namespace=user,
        busybox=shutil.which("busybox"),
        propagation=root_propagation(targets=targets),
    )


def _mountinfo(path: str) -> list[list[str]]:
    try:
        return [line.split() for line in Path(path).read_text().splitlines()]
    except OSError:
        return []


def root_propagation(
    own: str = "/proc/self/mountinfo",
    init: str = "/proc/1/mountinfo",
    targets: Sequence[str] = ("/",),
) -> Literal["private", "unchanged"]:
    """How ``unshare`` must set mount propagation so no mask leaks back to the host.

    ``private`` (the safe default) needs ``/`` to be a mount point, which it is not in a
    chroot (``unshare`` fails with EINVAL). There ``unchanged`` is as safe when no mount
    that kvmlab mounts onto is shared: ``targets`` are the paths it mounts on (the view's
    directory, each mask, each kept directory); a shared mount containing one of them
    (ours, or init's: the one holding the chroot is only listed there) would carry the
    mount to its peers on the host, so the guest is refused. A shared mount elsewhere
    (e.g. /run/netns, which ``ip netns`` makes shared) cannot receive kvmlab's mounts.
    """
    mine = _mountinfo(own)
    if any(len(f) > 4 and f[4] == "/" for f in mine):
        return "private"
    prefix = _chroot_dir(mine, _mountinfo(init))
    shared = []
    for f in mine:
        if len(f) > 4 and _is_shared(f) and any(_below(t, f[4]) for t in targets):
            shared.append(f[4])
    for f in _mountinfo(init):
        if len(f) <= 4 or not _is_shared(f):
            continue
        at = f[4]
        holds_chroot = prefix is None or _below(prefix or "/", at)  # or unknown: assume so
        inside = (
            prefix is not None
            and _below(at, prefix)
            and any(_below(t, at[len(prefix) :] or "/") for t in targets)
        )
        if holds_chroot or inside:
            shared.append(at)
    if not shared:
        return "unchanged"
    raise HostError(
        "cannot hide the host's secrets from the guest: / is not a mount point here (a "
        f"chroot?) and mounts are shared ({', '.join(shared[:3])}), so masks would reach "
        "the host",
        fix=[
            "run kvmlab outside the chroot",
            "or make the mounts private: mount --make-rprivate / (on the host)",
            'or share the whole host root: host_view = { show = ["/"] } on the guest',
        ],
    )


def _is_shared(fields: list[str]) -> bool:
    """Whether a mountinfo line's optional fields say ``shared:N``."""
    return any(t.startswith("shared:") for t in fields[6 : fields.index("-")] if "-" in fields)


def _chroot_dir(mine: list[list[str]], init: list[list[str]]) -> str | None:
    """Where our root is in init's mount tree (``/tmp/fresh/run``), from a mount both list
    by its id; None when no mount tells."""
    at = {f[0]: f[4] for f in init if len(f) > 4}
    for f in mine:
        if len(f) > 4 and f[0] in at and f[4] != "/" and at[f[0]].endswith(f[4]):
            return at[f[0]][: len(at[f[0]]) - len(f[4])]
    return None


USERNS_SWITCHES = {
    "/proc/sys/user/max_user_namespaces": ("0", "user.max_user_namespaces is 0"),
    "/proc/sys/kernel/unprivileged_userns_clone": ("0", "kernel.unprivileged_userns_clone is 0"),
    "/proc/sys/kernel/apparmor_restrict_unprivileged_userns": (
        "1",
        "kernel.apparmor_restrict_unprivileged_userns is 1",
    ),
}


def userns_blocked() -> str | None:
    """Why an unprivileged user cannot create a user namespace here, if a sysctl says so."""
    for path, (value, why) in USERNS_SWITCHES.items():
        try:
            if Path(path).read_text().strip() == value:
                return why
        except OSError:
            continue
    return None


def qemu_argv(loaded: LoadedLab, path: tuple[str, ...], guest: Guest, target: Target) -> list[str]:
    """The command line QEMU runs ``guest`` (at ``path``, under its accelerator) with on
    this host: rendered for ``target``, and wrapped to export a masked view of the host
    root when the guest shares it (``kvmlab render`` shows the plain argv)."""
    from kvmlab.errors import Problem, SpecError
    from kvmlab.guest.image import STANDALONE
    from kvmlab.guest.kernel import default_cache_dir
    from kvmlab.render import render_qemu
    from kvmlab.spec.rules import guest_key

    argv = render_qemu(guest, target).argv
    if target.image is None or target.image.share == STANDALONE:
        return argv
    view = guest.host_view
    keep = [default_cache_dir(), target.image.kernel.parent]
    try:
        return restricted(argv, target.run_dir, view.hide, view.show, keep)
    except HostViewError as exc:
        key = f"{guest_key(path)}.host_view.{exc.key}"
        raise SpecError([Problem(str(loaded.path), key, exc.message)]) from None
