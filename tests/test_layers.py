"""Imports run one way: each package names what it may import, and a guest backend
(``runtime/qemu``, ``runtime/libvirt``) is imported only where the backends are chosen.

Read from the source (every ``import`` and ``from … import``, at any depth, including the
ones inside functions), so a lazy import cannot hide an upward dependency.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import ROOT

PACKAGE = ROOT / "src" / "kvmlab"

# Utility modules every package may use (and the package's version).
BASE = {"errors", "paths", "bounded", "lazy", "jsondoc", "progress", "__version__"}

# What each package may import besides itself and BASE. Lower layers first:
# spec → render → proc → fabric → guest/runtime → bench/exits/migrate/net/report → cli;
# host stands alone.
MAY_IMPORT: dict[str, set[str]] = {
    "spec": set(),
    "render": {"spec"},
    "host": set(),
    "results": set(),
    "proc": set(),
    "fabric": {"proc", "render", "spec"},
    "guest": {"spec"},
    "runtime": {"guest", "fabric", "proc", "render", "spec", "host", "results"},
    "bench": {"runtime", "guest", "results", "spec"},
    "report": {"results"},
    "exits": {"report", "runtime", "render", "spec"},
    "migrate": {"runtime", "guest", "proc", "render", "results", "spec"},
    "net": {"bench", "fabric", "runtime", "guest", "proc", "render", "results", "spec"},
    "labs": set(),
    "cli": {"bench", "exits", "guest", "host", "labs", "migrate", "net", "proc", "render"}
    | {"report", "results", "runtime", "spec"},
    **{name: set() for name in BASE},
}

BACKENDS = ("kvmlab.runtime.qemu", "kvmlab.runtime.libvirt")

# The registry: the one module that maps a record's backend to its class.
REGISTRY = "kvmlab.runtime.backends"

# A backend's side of a higher domain: how that backend does one job for it (each imports
# its own backend and no other), chosen by that domain's registry.
BACKEND_SIDES = {
    "kvmlab.migrate.transports.qmp": "kvmlab.runtime.qemu",
    "kvmlab.migrate.transports.libvirt": "kvmlab.runtime.libvirt",
    "kvmlab.migrate.transports.libvirt_disks": "kvmlab.runtime.libvirt",  # its disk copies
    "kvmlab.cli.libvirtd_cmd": "kvmlab.runtime.libvirt",  # kvmlab libvirtd: private daemons
    "kvmlab.cli.render_daemon": "kvmlab.runtime.libvirt",  # render --format libvirt --connect
    "kvmlab.cli.import_cmd": "kvmlab.runtime.libvirt",  # import domain:NAME -c URI
    "kvmlab.exits.own_config": "kvmlab.runtime.libvirt",  # diagnose domain:NAME: its XML
}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(path: Path, name: str | None = None) -> Iterator[str]:
    """Every module ``path`` (module ``name``) imports, relative imports resolved."""
    here = (name or module_name(path)).split(".")
    package = here if path.name == "__init__.py" else here[:-1]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                target = ".".join([*base, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            yield target
            yield from (f"{target}.{alias.name}" for alias in node.names)


def sources() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def test_every_package_is_placed() -> None:
    packages = {module_name(p).split(".")[1] for p in sources() if module_name(p) != "kvmlab"}
    assert packages <= MAY_IMPORT.keys(), packages - MAY_IMPORT.keys()


@pytest.mark.parametrize("path", sources(), ids=lambda p: module_name(p))
def test_imports_run_downward(path: Path) -> None:
    name = module_name(path)
    if name == "kvmlab":
        return
    own = name.split(".")[1]
    allowed = MAY_IMPORT[own] | BASE | {own}
    upward = sorted(
        target
        for target in imported(path)
        if target.startswith("kvmlab.") and target.split(".")[1] not in allowed
    )
    assert not upward, f"{name} ({own}) may import {sorted(allowed)}, not {upward}"


def backend_importers(modules: dict[str, Path]) -> set[str]:
    found = set()
    for name, path in modules.items():
        if name == REGISTRY:
            continue
        own_backend = BACKEND_SIDES.get(name) or next(
            (b for b in BACKENDS if name.startswith(b)), None
        )
        for target in imported(path, name):
            backend = next((b for b in BACKENDS if target.startswith(b)), None)
            if backend is not None and backend != own_backend:
                found.add(name)
    return found


def test_backends_are_imported_only_by_their_sides() -> None:
    found = backend_importers({module_name(path): path for path in sources()})
    assert not found, (
        "imports a guest backend (runtime/qemu, runtime/libvirt) directly; go through the "
        f"guest contract, or make it a backend's side (BACKEND_SIDES): {sorted(found)}"
    )


def test_the_checker_sees_a_lazy_relative_backend_import(tmp_path: Path) -> None:
    """The fault it exists for: an import inside a function, relative, into a backend."""
    probe = tmp_path / "probe.py"
    probe.write_text("def f():\n    from ..runtime.qemu import machine\n    return machine\n")
    targets = set(imported(probe, "kvmlab.render.probe"))
    assert {"kvmlab.runtime.qemu", "kvmlab.runtime.qemu.machine"} <= targets
    assert backend_importers({"kvmlab.render.probe": probe}) == {"kvmlab.render.probe"}
    assert backend_importers({"kvmlab.runtime.qemu.probe": probe}) == set()


def test_one_migration_engine_over_the_transports() -> None:
    """The engine knows the transport contract and the registry, never a transport."""
    path = PACKAGE / "migrate" / "engine.py"
    targets = set(imported(path))
    assert not {t for t in targets if t.startswith(tuple(BACKEND_SIDES))}, targets
    assert not {t for t in targets if t.startswith(BACKENDS)}, targets


# Module import edges that close a cycle today, in packages others are restructuring:
# each is being removed (an edge already gone is simply not there to ignore); no edge of
# runtime or migrate may be listed.
CYCLE_EDGES_ALLOWED = {
    # being removed: the network models name the lab model for typing only
    ("kvmlab.spec.network", "kvmlab.spec.lab"),
    # being removed: a workload's registration runs its runner, which imports its name
    ("kvmlab.net.workloads.netcompare", "kvmlab.net.netcompare_run"),
    ("kvmlab.net.workloads.pvp", "kvmlab.net.pvp_run"),
}


def module_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Which module imports which, over the package: every import at any depth (inside
    functions and ``TYPE_CHECKING`` blocks too), a package's ``__init__`` a module of its
    own, ``from package import module`` an edge to that module."""
    return {
        name: {t for t in imported(path, name) if t in modules and t != name}
        for name, path in modules.items()
    }


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected sets of two or more modules (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            step = next(edges, None)
            if step is not None:
                if step not in index:
                    index[step] = low[step] = len(index)
                    stack.append(step)
                    on_stack.add(step)
                    work.append((step, iter(sorted(graph[step]))))
                elif step in on_stack:
                    low[node] = min(low[node], index[step])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_modules_import_each_other() -> None:
    """A module-level import graph without cycles (runtime and migrate without exception;
    the allowed edges are others' and being removed)."""
    graph = module_graph({module_name(path): path for path in sources()})
    for source, target in CYCLE_EDGES_ALLOWED:
        assert source.split(".")[1] not in ("runtime", "migrate"), source
        graph.get(source, set()).discard(target)
    assert not import_cycles(graph), import_cycles(graph)


def test_the_cycle_check_sees_a_lazy_import_closing_a_cycle(tmp_path: Path) -> None:
    """The fault it exists for: a module importing another at the top, which imports it
    back inside a function (the usual way a cycle is hidden)."""
    a, b, c = tmp_path / "a.py", tmp_path / "b.py", tmp_path / "c.py"
    a.write_text("from kvmlab.runtime import b\n")
    b.write_text("def f():\n    from . import a\n    return a\n")
    c.write_text("import kvmlab.runtime.a\n")
    modules = {"kvmlab.runtime.a": a, "kvmlab.runtime.b": b, "kvmlab.runtime.c": c}
    assert import_cycles(module_graph(modules)) == [["kvmlab.runtime.a", "kvmlab.runtime.b"]]
    b.write_text("def f():\n    return 1\n")
    assert import_cycles(module_graph(modules)) == []


def test_a_third_backend_is_its_own_package_and_one_registration() -> None:
    """The stub backend (tests/fakebackend) is written against the guest contract only:
    it imports no other backend and nothing of what orchestrates guests, and what makes
    it one of kvmlab's backends is its registry record, registered by one line."""
    stub = ROOT / "tests" / "fakebackend"
    contract = (
        "kvmlab.runtime.machine",
        "kvmlab.runtime.monitor",
        "kvmlab.runtime.records",
        "kvmlab.runtime.rundir",
        "kvmlab.runtime.boottime",
    )
    for path in sorted(stub.glob("*.py")):
        if path.name.startswith(("test_", "conftest")):
            continue
        name = f"tests.fakebackend.{path.stem}"
        runtime = {t for t in imported(path, name) if t.startswith("kvmlab.runtime.")}
        assert not {t for t in runtime if t.startswith(BACKENDS)}, (path.name, runtime)
        assert {t for t in runtime if not t.startswith(contract)} <= {
            "kvmlab.runtime.backends",  # only the guest's own kvmlab registers it (inner.py)
            "kvmlab.runtime.backends.register",
        }, (path.name, runtime)
    registrations = [
        ast.unparse(node)
        for path in stub.rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call) and ast.unparse(node.func) == "backends.register"
    ]
    assert registrations and set(registrations) == {"backends.register(fakebackend.KIND)"}
