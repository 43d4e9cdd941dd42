"""Module dependency resolution against a recorded modules.dep (Debian 6.1.0-56-amd64)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvmlab.guest.errors import ImageError
from kvmlab.guest.initramfs import (
    MODULE_GROUPS,
    OPTIONAL_GROUPS,
    ModuleInfo,
    groups_for,
    load_order,
    module_name,
    module_table,
    parse_modules_dep,
)

DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="module")
def modules() -> dict[str, ModuleInfo]:
    return parse_modules_dep((DATA / "modules-6.1.0-56-amd64.dep").read_text())


def names(order: list[ModuleInfo]) -> list[str]:
    return [module_name(m.path) for m in order]


def assert_deps_first(order: list[ModuleInfo], modules: dict[str, ModuleInfo]) -> None:
    seen: set[str] = set()
    for info in order:
        for dep in info.deps:
            assert module_name(dep) in seen, f"{info.path} loaded before its dependency {dep}"
        seen.add(module_name(info.path))


@pytest.mark.parametrize(
    ("path", "name"),
    [
        ("kernel/arch/x86/kvm/kvm-amd.ko", "kvm_amd"),
        ("kernel/fs/9p/9p.ko", "9p"),
        ("kernel/net/9p/9pnet_virtio.ko.xz", "9pnet_virtio"),
        ("kernel/fs/fuse/virtiofs.ko.zst", "virtiofs"),
    ],
)
def test_module_name(path: str, name: str) -> None:
    assert module_name(path) == name


def test_9p_pulls_its_whole_closure_dependencies_first(modules: dict[str, ModuleInfo]) -> None:
    order = load_order(modules, ["9pnet_virtio", "9p"])
    expected = ["virtio_ring", "virtio", "9pnet", "9pnet_virtio", "netfs", "fscache", "9p"]
    assert names(order) == expected
    assert_deps_first(order, modules)


def test_shared_dependencies_appear_once(modules: dict[str, ModuleInfo]) -> None:
    order = load_order(modules, MODULE_GROUPS["base"] + ("virtiofs", "virtio_net"))
    assert len(names(order)) == len(set(names(order)))
    assert names(order).index("virtio_ring") < names(order).index("virtio")
    assert_deps_first(order, modules)


def test_dashes_in_requests_are_normalised(modules: dict[str, ModuleInfo]) -> None:
    assert names(load_order(modules, ["kvm-amd"])) == ["irqbypass", "kvm", "ccp", "kvm_amd"]


def test_unknown_module_names_who_needs_it() -> None:
    broken = parse_modules_dep("kernel/a.ko: kernel/b.ko\n")
    with pytest.raises(ImageError, match=r"module b \(needed by a\)"):
        load_order(broken, ["a"])
    with pytest.raises(ImageError, match="module zzz is not"):
        load_order(broken, ["zzz"])


def test_cycle_is_an_error() -> None:
    cyclic = parse_modules_dep("kernel/a.ko: kernel/b.ko\nkernel/b.ko: kernel/a.ko\n")
    with pytest.raises(ImageError, match="a -> b -> a"):
        load_order(cyclic, ["a"])


def test_module_table_has_groups_in_order_with_dependencies(
    modules: dict[str, ModuleInfo],
) -> None:
    table = module_table(modules, ["base", "kvm_amd"]).splitlines()
    assert "base virtio_ring" in table  # a dependency: init skips it once loaded
    assert table[-1] == "kvm_amd kvm_amd"  # its options are modprobe's (test_image.py)
    groups = [line.split()[0] for line in table]
    assert groups == sorted(groups, key=["base", "kvm_amd"].index)


def test_groups_for_share_keeps_only_that_share() -> None:
    assert "9p" in groups_for("9p") and "virtiofs" not in groups_for("9p")
    assert "virtiofs" in groups_for("virtiofs") and "9p" not in groups_for("virtiofs")
    with pytest.raises(ImageError, match="unknown share"):
        groups_for("nfs")


def test_every_group_resolves_on_the_recorded_kernel(modules: dict[str, ModuleInfo]) -> None:
    for group in MODULE_GROUPS.keys() - OPTIONAL_GROUPS:  # the recording has no e1000e
        assert_deps_first(load_order(modules, MODULE_GROUPS[group]), modules)


def test_an_optional_group_is_left_out_where_its_kernel_lacks_it(
    modules: dict[str, ModuleInfo],
) -> None:
    """The cloud kernel has no e1000e: its image leaves the group out (init then warns that
    the NIC has no driver) instead of failing to build."""
    assert "e1000e" not in modules
    table = module_table(modules, ["base", "e1000e"])
    assert " e1000e " not in table and table.startswith("base ")
    with_it = {**modules, "e1000e": ModuleInfo("kernel/drivers/net/e1000e/e1000e.ko", ())}
    assert "e1000e e1000e" in module_table(with_it, ["e1000e"]).splitlines()
