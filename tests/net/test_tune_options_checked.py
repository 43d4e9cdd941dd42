"""``kvmlab tune``'s options are checked before anything is tuned, and a bad value is never
echoed whole (5000 characters are counted, not printed)."""

from __future__ import annotations

import os


def test_tune_options_are_checked_and_never_echoed_whole() -> None:
    from tests.conftest import cli

    env = {**os.environ, "KVMLAB_TUNING_STATE": "/nonexistent/kvmlab-test/state.json"}
    yaml = cli(env, "tune", "verify", "--isolate", "0", "-o", "yaml")
    assert yaml.returncode == 2 and "choose text or json (got 'yaml')" in yaml.stderr
    long = cli(env, "tune", "apply", "--isolate", "0", "--unmovable-irqs", "a" * 5000)
    assert long.returncode == 2 and "(5000 characters)" in long.stderr
    assert len(long.stderr) < 300, long.stderr
