"""Processes kvmlab starts and owns: liveness, stopping with timeouts, signals, and the run-root
files it alone may delete."""
