"""The tuning state file: kvmlab's record of the host values it changed, read back as root.

Every kvmlab command rolls back the tuning of a run that died from this file, so it is
read like any input: a regular file (opened without following a link and without
blocking), owned by this user and writable by nobody else, at most :data:`MAX_STATE_BYTES`,
and valid against :class:`SavedState`: each change names a tunable kvmlab knows, at its
fixed path below ``/proc`` or ``/sys`` (:func:`known_path`), with a value of that
tunable's form. The root it was applied under must be the root rolled back under.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
from pathlib import Path
from typing import Annotated

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    model_validator,
)

from kvmlab.bounded import read_at_most
from kvmlab.errors import KvmlabError, printable
from kvmlab.net.tunepath import STATE_ENV, state_path

MAX_STATE_BYTES = 8 << 20
"""A state file lists a few settings per IRQ and CPU: 8 MiB holds tens of thousands."""
MAX_PID = 1 << 22
"""The largest pid Linux gives (``pid_max`` is at most 2^22)."""

_CPULIST = r"[0-9][0-9,-]{0,47999}"
_CPUMASK = r"[0-9a-f][0-9a-f,]{0,2400}"
_KNOWN: tuple[tuple[re.Pattern[str], re.Pattern[str]], ...] = tuple(
    (re.compile(path), re.compile(value))
    for path, value in (
        (r"proc/sys/kernel/nmi_watchdog", r"[0-9]{1,3}"),
        (r"proc/sys/kernel/numa_balancing", r"[0-9]{1,3}"),
        (r"proc/sys/vm/stat_interval", r"[0-9]{1,7}"),
        (r"sys/kernel/mm/transparent_hugepage/enabled", r"always|madvise|never"),
        (r"sys/kernel/mm/ksm/run", r"[0-9]{1,3}"),
        (r"sys/devices/virtual/workqueue/cpumask", _CPUMASK),
        (r"proc/irq/default_smp_affinity", _CPUMASK),
        (r"proc/irq/[0-9]{1,7}/smp_affinity_list", _CPULIST),
        (r"sys/devices/system/cpu/cpu[0-9]{1,4}/cpufreq/scaling_governor", r"[a-z_]{1,32}"),
    )
)
"""(path, value) of every tunable kvmlab changes, relative to the host's root."""


class TuningStateError(KvmlabError):
    """The tuning state file is not kvmlab's record: nothing in it is trusted or written.

    ``foreign``: the file is not a tuning state kvmlab wrote at all (not a regular file of
    this user's, not JSON, not an object of the record's shape), so it is named as such and
    left alone: the fix is to point :data:`STATE_ENV` at kvmlab's own file, never to remove
    it (``KVMLAB_TUNING_STATE=/etc/passwd`` must not read as advice to delete
    /etc/passwd). Otherwise it is a record of kvmlab's shape whose values kvmlab will not
    trust: what it lists may be restored by hand, and then the record removed."""

    exit_code = 2

    def __init__(self, path: Path, why: str, foreign: bool = False) -> None:
        self.path = path
        self.foreign = foreign
        if foreign:
            text = (
                f"{path}: {why}, so it is not kvmlab's tuning state; kvmlab leaves it as it "
                f"is and writes nothing from it: set {STATE_ENV} to name kvmlab's own tuning "
                "state file"
            )
        else:
            text = (
                f"{path}: {why}; kvmlab does not trust this tuning state and writes nothing "
                "from it: restore by hand what it lists, if kvmlab wrote it, then remove it "
                f"(or point {STATE_ENV} elsewhere)"
            )
        super().__init__(printable(text))


class StateWriteError(KvmlabError):
    """The tuning state cannot be saved: nothing more is changed."""

    exit_code = 3

    def __init__(self, path: Path, why: str) -> None:
        super().__init__(
            printable(
                f"{path}: cannot save the tuning state ({why}); point {STATE_ENV} at a file "
                "in a directory only you can write"
            )
        )


def known_path(path: str) -> bool:
    """Whether ``path`` (relative to the host's root) is a tunable kvmlab changes."""
    return any(p.fullmatch(path) for p, _ in _KNOWN)


def _value_form(path: str) -> re.Pattern[str] | None:
    return next((v for p, v in _KNOWN if p.fullmatch(path)), None)


def _known(path: str) -> str:
    if not known_path(path):
        shown = path if len(path) <= 80 else path[:77] + "..."
        raise ValueError(f"names {shown!r}, which kvmlab never tunes")
    return path


Text = Annotated[str, Field(max_length=64)]


def _irq_path(path: str) -> str:
    if not _IRQ_AFFINITY.fullmatch(path):
        shown = path if len(path) <= 80 else path[:77] + "..."
        raise ValueError(f"names {shown!r}, which is not an IRQ's affinity")
    return path


_IRQ_AFFINITY = re.compile(r"proc/irq/[0-9]{1,7}/smp_affinity_list")
IrqPath = Annotated[str, Field(max_length=64), AfterValidator(_irq_path)]


class SavedChange(BaseModel):
    """A setting kvmlab changed: the value it found there, which a rollback writes back."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    name: Text
    path: Annotated[str, Field(max_length=128), AfterValidator(_known)]
    original: Annotated[str, Field(max_length=48000)]
    wanted: Annotated[str, Field(max_length=48000)]

    @model_validator(mode="after")
    def _values(self) -> SavedChange:
        form = _value_form(self.path)
        for value in (self.original, self.wanted):
            if form is None or not form.fullmatch(value):
                shown = value if len(value) <= 40 else value[:37] + "..."
                raise ValueError(f"{shown!r} is not a value of {self.path}")
        return self


class SavedState(BaseModel):
    """What the state file holds."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    owner: tuple[Annotated[int, Field(ge=1, le=MAX_PID)], Annotated[int, Field(ge=0)] | None] | None
    """(pid, start time) of the run that rolls back itself; None: ``kvmlab tune rollback``."""
    root: Annotated[str, Field(max_length=4096)]
    changes: Annotated[list[SavedChange], Field(max_length=100_000)]
    unmovable: Annotated[list[IrqPath], Field(max_length=100_000)] = []
    """IRQs the apply found the kernel would not move (nothing to write back)."""


class _ChangeShape(BaseModel):
    """A :class:`SavedChange`'s shape alone: its keys and their types, no value judged."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    name: str
    path: str
    original: str
    wanted: str


class _StateShape(BaseModel):
    """A :class:`SavedState`'s shape alone: a document that fails it is not a record kvmlab
    wrote at all, one that passes it (and fails :class:`SavedState`) is kvmlab's record
    with values kvmlab does not trust."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    owner: tuple[int, int | None] | None
    root: str
    changes: list[_ChangeShape]
    unmovable: list[str] = []


class State:
    """The state file: what kvmlab changed and by whom; present exactly while tuned."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or state_path()

    def read(self) -> SavedState | None:
        """The saved state, or None when nothing is applied; :class:`TuningStateError`
        when the file is not kvmlab's record."""
        data = self._bytes()
        if data is None:
            return None
        try:
            return SavedState.model_validate_json(data)
        except ValidationError as exc:
            distrusted = exc
        try:
            _StateShape.model_validate_json(data)
        except ValidationError as exc:  # not even the shape of kvmlab's record
            raise TuningStateError(self.path, _why(exc), foreign=True) from None
        raise TuningStateError(self.path, _why(distrusted)) from None

    def _bytes(self) -> bytes | None:
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
        try:  # a device is never opened: opening one can act (a watchdog arms)
            first = os.lstat(self.path)
        except FileNotFoundError:
            return None
        except OSError as exc:
            why = f"cannot be read ({exc.strerror or exc})"
            raise TuningStateError(self.path, why, foreign=True) from None
        if stat.S_ISLNK(first.st_mode):
            raise TuningStateError(self.path, "is a symbolic link", foreign=True)
        if not stat.S_ISREG(first.st_mode):
            raise TuningStateError(self.path, "is not a regular file", foreign=True)
        try:
            fd = os.open(self.path, flags)
        except FileNotFoundError:
            return None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise TuningStateError(self.path, "is a symbolic link", foreign=True) from None
            why = f"cannot be read ({exc.strerror or exc})"
            raise TuningStateError(self.path, why, foreign=True) from None
        too_large = f"is larger than {MAX_STATE_BYTES >> 20} MiB"
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or (st.st_dev, st.st_ino) != (
                first.st_dev,
                first.st_ino,
            ):
                raise TuningStateError(self.path, "is not a regular file", foreign=True)
            if st.st_uid != os.geteuid() or st.st_mode & 0o022:
                mode = f"{st.st_mode & 0o777:o}"
                why = f"has owner {st.st_uid} and mode {mode}, not this user's alone"
                raise TuningStateError(self.path, why, foreign=True)
            if st.st_size > MAX_STATE_BYTES:
                raise TuningStateError(self.path, too_large, foreign=True)
            data = read_at_most(fd, MAX_STATE_BYTES)
            if data is None:
                raise TuningStateError(self.path, too_large, foreign=True)
            return data
        except OSError as exc:
            why = f"cannot be read ({exc.strerror or exc})"
            raise TuningStateError(self.path, why, foreign=True) from None
        finally:
            os.close(fd)

    def write(self, state: SavedState) -> None:
        """Atomically, 0600, fsynced: a crash right after still finds every original. The
        temporary file is made new (never through a link), then renamed over the path; a
        write that fails (a full disk) removes it, leaving the state file as it was."""
        parent = self.path.parent
        tmp = self.path.with_name(f".{self.path.name}.tmp")
        made = False
        try:
            parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            st = parent.stat()
            if st.st_uid != os.geteuid() or st.st_mode & 0o022:
                mode = f"{st.st_mode & 0o777:o}"
                raise StateWriteError(self.path, f"its directory is writable by others ({mode})")
            tmp.unlink(missing_ok=True)
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
            fd = os.open(tmp, flags, 0o600)
            made = True
            with os.fdopen(fd, "w") as f:
                f.write(state.model_dump_json(indent=2))
                f.flush()
                os.fsync(f.fileno())
            tmp.replace(self.path)
            made = False
        except OSError as exc:
            raise StateWriteError(self.path, exc.strerror or str(exc)) from None
        finally:
            if made:  # the write failed or was cut short: no half-written record stays
                with contextlib.suppress(OSError):
                    tmp.unlink()

    def remove(self) -> None:
        """Nothing is applied any more."""
        self.path.unlink(missing_ok=True)


def _why(exc: ValidationError) -> str:
    """The first problem of a state file, in kvmlab's words."""
    err = exc.errors()[0]
    key = ".".join(str(part) for part in err["loc"])
    kind = err["type"]
    if kind == "json_invalid":
        return "not JSON"
    if kind == "model_type":
        return f"{key} is not a JSON object" if key else "not a JSON object"
    key = key or "the record"
    if kind == "missing":
        return f"{key} is missing"
    if kind == "extra_forbidden":
        return f"{key} is not a key of kvmlab's tuning state"
    if kind == "value_error":
        return f"{key} {err['msg'].removeprefix('Value error, ')}"
    return f"{key} has the wrong form"
