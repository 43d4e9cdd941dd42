"""A migration job followed to its end: sampled, steered (postcopy after a pass, ``auto``'s
in-flight rule, ``--max-time``), and its final times read, through the transport."""

from __future__ import annotations

import time

from kvmlab.migrate.modes import AUTO_PASSES, Settings
from kvmlab.migrate.result import Outcome
from kvmlab.migrate.stats import Sample, parse
from kvmlab.migrate.transports.base import AnyTransport, Refused
from kvmlab.progress import Progress

FINAL_TIMES_S = 3.0
"""How long a completed job's final times are waited for (see :func:`final_times`)."""
CANCEL_S = 60.0
"""How long a cancelled job may take to end."""


def follow(
    transport: AnyTransport,
    outcome: Outcome,
    t0: float,
    progress: Progress,
    steer: bool = True,
) -> None:
    """Sample the job until it ends; start postcopy or cancel as planned (``steer``; a job
    being cancelled is only followed, for at most a minute, and one in postcopy until it
    ends: the guest is on both sides until then)."""
    settings = transport.settings
    last_pass = 0.0
    bounded = not steer and outcome.postcopy_started is None
    deadline = time.monotonic() + CANCEL_S if bounded else None
    cancelled_at: float | None = None
    unstuck = False
    while True:
        t = time.monotonic() - t0
        reply, job = transport.sample()
        if job:
            outcome.backend_job.samples.append({"t": t, **job})
        sample = parse(reply, t) if reply is not None else None
        sync = last_pass
        if sample is not None:
            outcome.raw_last = reply
            outcome.samples.append(sample)
            outcome.status = sample.status
            sync = sample.ram.get("dirty-sync-count", 0.0)
        ended = transport.ended()
        if ended is not None:
            outcome.status = ended.status
            if ended.error:
                outcome.error = ended.error
            if ended.status == "completed":
                final_times(transport, outcome, t0)
            return
        if sync != last_pass and sample is not None:
            last_pass = sync
            progress.step(
                f"pass {sync:.0f} at {t:.1f} s: {sample.ram.get('remaining', 0) / 1048576:.0f}"
                f" MiB remaining, {sample.ram.get('mbps', 0):.0f} Mbit/s"
            )
        if steer and outcome.cancelled is None:
            _steer(transport, outcome, settings, t, sample, progress)
        if steer and outcome.cancelled is not None:
            cancelled_at = cancelled_at or time.monotonic()
            waited = time.monotonic() - cancelled_at
            if waited > CANCEL_S and not unstuck:
                unstuck = True
                done = transport.unstick()
                progress.step(
                    f"the job has not ended {waited:.0f} s after the cancel"
                    + (f": {done}" if done else "")
                )
            elif waited > 2 * CANCEL_S:
                outcome.error = (
                    f"the job did not end {waited:.0f} s after it was cancelled; "
                    f"{transport.describe()} may still hold the guest's domain"
                )
                return
        alive = transport.destination_alive()
        if alive is False and outcome.postcopy_started is None:
            outcome.error = outcome.error or "the destination QEMU exited during the migration"
        status = sample.status if sample is not None else None
        if outcome.postcopy_started is not None and (alive is False or status == "postcopy-paused"):
            # In postcopy the guest's state is split between the two: nothing can resume it.
            outcome.status = "failed"
            outcome.lost = True
            why = "its QEMU exited" if alive is False else f"postcopy stalled ({status})"
            outcome.error = (
                f"the destination failed during postcopy ({why}): the guest is "
                "lost (its memory was split between source and destination)"
            )
            return
        if deadline is not None and time.monotonic() > deadline:
            done = None if unstuck else transport.unstick()
            if done is None:
                return
            unstuck = True
            progress.step(f"the job has not ended {CANCEL_S:.0f} s after the cancel: {done}")
            deadline = time.monotonic() + CANCEL_S
        for event in transport.wait(transport.sample_s):
            outcome.events.append(
                {"t": time.monotonic() - t0, "event": event["event"], "data": event.get("data", {})}
            )


def _steer(
    transport: AnyTransport,
    outcome: Outcome,
    settings: Settings,
    t: float,
    sample: Sample | None,
    progress: Progress,
) -> None:
    """The decisions during the job: postcopy after the pass asked for, ``auto`` after its
    passes, and what ``--max-time`` says once it has passed."""
    sync = sample.ram.get("dirty-sync-count", 0.0) if sample is not None else 0.0
    if outcome.postcopy_started is None and transport.can_postcopy:
        if settings.mode == "postcopy" and sync > settings.postcopy_after_pass:
            try:
                transport.start_postcopy()
            except Refused:
                pass  # too early for the backend: asked again at the next sample
            else:
                outcome.postcopy_started = t
                progress.step(f"switching to postcopy at {t:.1f} s (after pass {sync - 1:.0f})")
        elif settings.mode == "auto" and sync > AUTO_PASSES:
            transport.start_postcopy()
            outcome.postcopy_started = t
            expected = sample.times.get("expected-downtime", 0) if sample is not None else 0
            outcome.choice = fallback(
                outcome.choice,
                f"precopy did not reach the {transport.downtime_target_ms()} ms target in "
                f"{AUTO_PASSES} passes (expected downtime {expected:.0f} ms): postcopy",
            )
            progress.step(f"auto: {outcome.choice} at {t:.1f} s")
    if t <= settings.max_seconds or outcome.postcopy_started is not None:
        return
    if settings.on_timeout == "postcopy" and transport.can_postcopy:
        try:
            transport.start_postcopy()
        except Refused as exc:
            outcome.cancelled = f"not converged in {settings.max_seconds:g} s, and {exc}"
        else:
            outcome.postcopy_started = t
            timed_out = (
                f"not converged in {settings.max_seconds:g} s: switched to "
                "postcopy (--on-timeout postcopy)"
            )
            outcome.choice = f"{outcome.choice}; then {timed_out}" if outcome.choice else timed_out
            progress.step(f"not converged in {settings.max_seconds:g} s: switching to postcopy")
            return
    else:
        outcome.cancelled = f"not converged in {settings.max_seconds:g} s"
    progress.step(f"{outcome.cancelled}: cancelling (the source keeps running)")
    transport.cancel()


def fallback(why: str | None, rule: str) -> str:
    """``auto``'s choice by its in-flight rule, after why it had to use that rule."""
    return f"{why}; by QEMU's figures: {rule}" if why else rule


def final_times(transport: AnyTransport, outcome: Outcome, t0: float) -> None:
    """QEMU 7.2 reports ``completed`` before it has computed ``total-time`` and ``downtime``
    (both 0 until ``migration_calculate_complete`` runs a moment later): sample again until
    they are there, so a finished migration never reads as 0 ms (while the source's QEMU
    still answers; libvirt's completed job has its own times)."""
    deadline = time.monotonic() + FINAL_TIMES_S
    while (
        outcome.samples
        and not outcome.samples[-1].times.get("total-time")
        and time.monotonic() < deadline
    ):
        time.sleep(0.02)
        reply, _ = transport.sample()
        if reply is None:
            return
        outcome.samples.append(parse(reply, time.monotonic() - t0))
        outcome.raw_last = reply
