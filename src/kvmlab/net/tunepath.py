"""Where the tuning state file lives, apart from the models that read it.

Every kvmlab command looks for that file first (:func:`kvmlab.cli.tune_cmd.restore_abandoned`)
and almost always finds none: this module answers that with one ``lstat`` and imports
nothing heavy, so only a command that finds a state pays for reading it
(:mod:`kvmlab.net.tunestate`) or rolling it back (:mod:`kvmlab.net.tune`).
"""

from __future__ import annotations

import os
from pathlib import Path

STATE_ENV = "KVMLAB_TUNING_STATE"
DEFAULT_STATE = Path("/var/lib/kvmlab/tuning.json")


def state_path() -> Path:
    """``$KVMLAB_TUNING_STATE``, else :data:`DEFAULT_STATE`."""
    return Path(os.environ.get(STATE_ENV) or DEFAULT_STATE)


def surely_absent(path: Path) -> bool:
    """Whether ``path`` certainly does not exist (``lstat`` says so). Anything else, a file,
    a link, a directory that cannot be searched, is False: reading the state says what it
    is."""
    try:
        os.lstat(path)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return False
