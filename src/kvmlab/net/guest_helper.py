"""Runs inside the PVP guest (the guest's own python3, stdlib only): owns testpmd there and
answers kvmlab's requests, so a counter snapshot costs one agent exec and no polling.

    python3 guest_helper.py WORK dpdk-testpmd ARGS...

Requests are lines written to ``WORK/req`` (commands separated by ``;``); each answer is
written whole to the FIFO ``WORK/resp``: per command ``==kvmlab-at <guest monotonic
seconds when it was typed>``, then what testpmd printed before its next prompt; then
``==kvmlab-end``. ``quit`` ends testpmd and the helper. ``WORK/ready`` holds testpmd's pid
once it reached its first prompt; ``WORK/log`` everything it printed.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

PROMPT = b"testpmd> "


def main() -> int:
    """Start testpmd, then answer requests until ``quit`` or testpmd's end."""
    work, argv = sys.argv[1], sys.argv[2:]
    req, resp = f"{work}/req", f"{work}/resp"
    for fifo in (req, resp):
        os.mkfifo(fifo, 0o600)
    proc = subprocess.Popen(
        ["stdbuf", "-oL", "-eL", *argv],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    assert proc.stdin is not None and proc.stdout is not None
    log = Path(work, "log").open("ab")  # noqa: SIM115
    pending = b""

    def answer() -> bytes | None:
        nonlocal pending
        while PROMPT not in pending:
            chunk = os.read(proc.stdout.fileno(), 65536)  # type: ignore[union-attr]
            if not chunk:
                return None
            log.write(chunk)
            log.flush()
            pending += chunk
        text, _, pending = pending.partition(PROMPT)
        return text

    if answer() is None:
        return 3
    Path(work, "ready").write_text(str(proc.pid))
    requests = os.fdopen(os.open(req, os.O_RDWR), "rb")  # held for writing too: never EOF
    for line in requests:
        commands = line.decode(errors="replace").strip().split(";")
        out = []
        for command in commands:
            at = time.monotonic()
            proc.stdin.write(command.encode() + b"\n")
            proc.stdin.flush()
            text = answer() if command != "quit" else b""
            if text is None:
                out.append("==kvmlab-error testpmd exited\n")
                break
            out.append(f"==kvmlab-at {at:.6f}\n{text.decode(errors='replace')}")
        with Path(resp).open("w") as f:
            f.write("".join(out) + "==kvmlab-end\n")
        if commands == ["quit"] or proc.poll() is not None:
            break
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
    return 0


if __name__ == "__main__":
    sys.exit(main())
