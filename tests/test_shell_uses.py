"""Where kvmlab runs ``sh``, and why each is allowed: no ``shell=True`` anywhere, and every
argv that starts a shell is on the list below with where it runs. On the host a shell may
only run a fixed script whose data arrives as positional parameters (``"$1"``), never
spliced into the script's text; a new use fails this test until it is justified here."""

from __future__ import annotations

import ast
import subprocess
from pathlib import Path

from tests.conftest import ROOT

SRC = ROOT / "src" / "kvmlab"

ON_THE_HOST = {
    (
        "runtime/hostview.py",
        "wrap",
    ): "the masked host view: the shipped hostview.sh, run by unshare before it execs QEMU "
    "(paths and masks are its arguments)",
    (
        "net/migration_path.py",
        "_set_up_tap",
    ): "a tap in the packet-path bridge's namespace: BRIDGE_SETUP, a constant; the tap, "
    "addresses and MAC are its arguments",
    (
        "exits/sampling.py",
        "run_argv",
    ): "hostprof.sh, the same script on the host or in a guest hypervisor (no Python in "
    "QEMU's mount namespace there); its arguments checked by check_run_args",
    ("exits/sampling.py", "clean_argv"): "hostprof.sh's clean-up, as above",
    ("exits/tracepoints.py", "run_argv"): "trace.sh, the same on the host or in a guest",
    ("exits/tracepoints.py", "clean_argv"): "trace.sh's clean-up, as above",
    ("exits/perfkvm.py", "record_argv"): "perf.sh, the same on the host or in a guest",
    (
        "bench/workloads/kbuild.py",
        "kbuild_steps",
    ): 'the kernel-build workload, at L0 on the host as at L1/L2: the tree is "$1"',
}
"""Shells that may run on the host: (module, function) -> why."""

IN_GUESTS = {
    ("exits/collect.py", "guest_read"),
    ("guest/agent.py", "kill_argv"),
    ("net/guest_dpdk.py", "_sh"),
    ("net/guest_dpdk.py", "_helper_gone"),
    ("net/migration_path.py", "_guest_sh"),
    ("net/migration_path.py", "_install"),
    ("net/multiqueue.py", "_exec"),
    ("runtime/guest_disks.py", "mount_script"),
    ("runtime/guest_network.py", "setup_script"),
    ("runtime/guest_network.py", "address_script"),
    ("runtime/background.py", "start_background"),
    ("runtime/background.py", "_await_first_line"),
    ("runtime/nested.py", "inner_evidence"),
    ("runtime/nested.py", "copy_lab"),
    ("runtime/nested.py", "relay_script"),
}
"""Shells that run inside a guest, through its agent (the guest's own root)."""


def _shell_argvs() -> tuple[set[tuple[str, str]], list[str]]:
    """(module, function) of every list display holding ``"sh"``; ``shell=`` uses."""
    found: set[tuple[str, str]] = set()
    shell_kw: list[str] = []
    for path in sorted(SRC.rglob("*.py")):
        module = path.relative_to(SRC).as_posix()
        tree = ast.parse(path.read_text())
        for fn in ast.walk(tree):
            if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(fn):
                if isinstance(node, ast.List) and any(
                    isinstance(e, ast.Constant) and e.value == "sh" for e in node.elts
                ):
                    found.add((module, fn.name))
                if isinstance(node, ast.keyword) and node.arg == "shell":
                    shell_kw.append(f"{module}:{fn.name}")
    return found, shell_kw


def test_no_shell_true_anywhere() -> None:
    assert _shell_argvs()[1] == []


def test_every_shell_is_on_the_list_with_its_reason() -> None:
    found, _ = _shell_argvs()
    unexplained = found - set(ON_THE_HOST) - IN_GUESTS
    assert not unexplained, f"a shell not justified in {__file__}: {sorted(unexplained)}"
    assert not (set(ON_THE_HOST) | IN_GUESTS) - found, "a listed shell is gone: drop it"


def test_a_host_shell_script_is_never_built_from_data() -> None:
    """Each host shell's script is a name (a constant or a shipped file's text) or a
    constant string: no f-string, ``%`` or ``.format`` builds the text a shell parses."""
    for module, function in ON_THE_HOST:
        tree = ast.parse((SRC / module).read_text())
        fn = next(
            n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == function
        )
        for node in ast.walk(fn):
            if not isinstance(node, ast.List):
                continue
            elts = node.elts
            for i, e in enumerate(elts[:-2]):
                if isinstance(e, ast.Constant) and e.value == "sh":
                    script = elts[i + 2] if _is(elts[i + 1], "-c") else elts[i + 1]
                    assert not isinstance(script, ast.JoinedStr | ast.BinOp), (module, function)


def _is(node: ast.expr, value: str) -> bool:
    return isinstance(node, ast.Constant) and node.value == value


def test_the_private_daemon_starts_without_a_shell() -> None:
    text = (Path(SRC) / "runtime/libvirt/private.py").read_text()
    assert '"sh"' not in text and "sh -c" not in text


def test_every_shipped_script_parses() -> None:
    """``sh -n`` over each script kvmlab ships (a quote inside a quoted body, for instance,
    breaks the script only where it runs: inside a guest)."""
    scripts = sorted(SRC.rglob("*.sh"))
    assert len(scripts) >= 5
    for script in scripts:
        done = subprocess.run(["sh", "-n", str(script)], capture_output=True, text=True)
        assert done.returncode == 0, (script.name, done.stderr)
