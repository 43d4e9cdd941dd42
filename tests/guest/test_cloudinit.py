"""The NoCloud seed: user-data and meta-data content, and the ISO 9660 image it is written to.

user-data is JSON after its ``#cloud-config`` line, and JSON is YAML, so ``json`` parses it
here (PyYAML is not a kvmlab dependency). The functional test in test_disk_boot.py checks
that cloud-init itself accepts it (``cloud-init schema --system`` in the guest).
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest

from kvmlab.errors import ProcessFailure, ToolMissing
from kvmlab.guest import cloudinit
from kvmlab.guest.cloudinit import (
    AGENT_SCRIPT,
    SeedError,
    default_ssh_keys,
    meta_data,
    render_user_data,
    seed_files,
    user_data,
    write_seed,
)
from kvmlab.spec import CloudInit

KEY_A = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKvmlabTestKeyA alice@host"
KEY_B = "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABgQkvmlabTestKeyB bob@host"


def parse_user_data(text: str) -> dict[str, Any]:
    header, _, body = text.partition("\n")
    assert header == "#cloud-config"
    parsed: dict[str, Any] = json.loads(body)
    return parsed


def isoinfo(*args: str) -> str:
    proc = subprocess.run(
        ["isoinfo", *args], capture_output=True, text=True, timeout=30, check=True
    )
    return proc.stdout


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A HOME with two public keys (and a private one that must not be read)."""
    ssh = tmp_path / "home" / ".ssh"
    ssh.mkdir(parents=True)
    (ssh / "id_ed25519.pub").write_text(f"{KEY_A}\n")
    (ssh / "id_rsa.pub").write_text(f"# a comment\n\n{KEY_B}\n")
    (ssh / "id_ed25519").write_text("-----BEGIN OPENSSH PRIVATE KEY-----\n")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("SUDO_USER", raising=False)
    return tmp_path / "home"


def test_user_data_creates_the_user_with_sudo_keys_and_no_password() -> None:
    config = parse_user_data(render_user_data(user_data(CloudInit(user="alice"), [KEY_A])))
    assert config["ssh_pwauth"] is False
    assert config["disable_root"] is True
    [user] = config["users"]
    assert user["name"] == "alice"
    assert user["sudo"] == "ALL=(ALL) NOPASSWD:ALL"
    assert user["lock_passwd"] is True
    assert user["ssh_authorized_keys"] == [KEY_A]
    assert "passwd" not in user and "plain_text_passwd" not in user


def test_agent_is_enabled_by_a_per_boot_script() -> None:
    config = parse_user_data(render_user_data(user_data(CloudInit(), [])))
    [script] = config["write_files"]
    assert script["path"] == AGENT_SCRIPT
    assert script["path"].startswith("/var/lib/cloud/scripts/per-boot/")
    assert script["permissions"] == "0755"
    assert script["content"].startswith("#!/bin/sh\n")
    assert "systemctl enable --now qemu-guest-agent" in script["content"]


def test_without_agent_nothing_is_started() -> None:
    config = parse_user_data(render_user_data(user_data(CloudInit(agent=False), [KEY_A])))
    assert "write_files" not in config
    assert "runcmd" not in config and "bootcmd" not in config


def test_without_keys_the_user_has_none() -> None:
    config = parse_user_data(render_user_data(user_data(CloudInit(), [])))
    assert "ssh_authorized_keys" not in config["users"][0]


@pytest.mark.parametrize("bad", ["", "  ", f"{KEY_A}\n{KEY_B}", "ssh-rsa AAAA\rx"])
def test_a_key_must_be_one_line(bad: str) -> None:
    with pytest.raises(SeedError, match="one-line public key"):
        user_data(CloudInit(), [bad])


def test_default_keys_are_the_invoking_users_public_keys(home: Path) -> None:
    assert default_ssh_keys(home) == [KEY_A, KEY_B]
    assert default_ssh_keys() == [KEY_A, KEY_B]
    files = seed_files(CloudInit(), "vm1")
    assert parse_user_data(files["user-data"])["users"][0]["ssh_authorized_keys"] == [KEY_A, KEY_B]


def test_keys_in_the_spec_win_over_the_home_directory(home: Path) -> None:
    files = seed_files(CloudInit(ssh_keys=[KEY_B]), "vm1")
    assert parse_user_data(files["user-data"])["users"][0]["ssh_authorized_keys"] == [KEY_B]


def test_no_ssh_directory_means_no_keys(tmp_path: Path) -> None:
    assert default_ssh_keys(tmp_path) == []


def test_under_sudo_the_keys_come_from_the_sudo_users_home(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SUDO_USER", "nobody")
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    assert cloudinit._invoking_home() == Path(pwd.getpwnam("nobody").pw_dir)
    assert KEY_A not in default_ssh_keys()


def test_meta_data_names_the_host_and_an_instance_that_follows_the_content() -> None:
    text = render_user_data(user_data(CloudInit(), [KEY_A]))
    meta = meta_data("vm1", text)
    assert meta["local-hostname"] == "vm1"
    assert meta["instance-id"].startswith("kvmlab-vm1-")
    assert meta_data("vm1", text) == meta
    assert meta_data("vm2", text)["instance-id"] != meta["instance-id"]
    other = render_user_data(user_data(CloudInit(), [KEY_B]))
    assert meta_data("vm1", other)["instance-id"] != meta["instance-id"]


@pytest.mark.parametrize("bad", ["", "-vm", "vm-", "a_b", "a.b", "x" * 64])
def test_bad_hostnames_are_refused(bad: str) -> None:
    with pytest.raises(SeedError, match="bad hostname"):
        meta_data(bad, "#cloud-config\n{}\n")


def test_seed_is_an_iso_labelled_cidata_with_both_files(tmp_path: Path) -> None:
    seed = tmp_path / "cidata.img"
    spec = CloudInit(user="kvmlab", ssh_keys=[KEY_A])
    write_seed(seed, spec, hostname="vm1")
    assert stat.S_IMODE(seed.stat().st_mode) == 0o600
    assert "Volume id: cidata" in isoinfo("-d", "-i", str(seed)).splitlines()
    assert sorted(isoinfo("-f", "-R", "-i", str(seed)).split()) == ["/meta-data", "/user-data"]
    expected = seed_files(spec, "vm1")
    for name, content in expected.items():
        assert isoinfo("-R", "-x", f"/{name}", "-i", str(seed)) == content
    meta = json.loads(isoinfo("-R", "-x", "/meta-data", "-i", str(seed)))
    assert meta["local-hostname"] == "vm1"
    assert [p.name for p in tmp_path.iterdir()] == ["cidata.img"]


def test_seed_replaces_an_old_one(tmp_path: Path) -> None:
    seed = tmp_path / "cidata.img"
    seed.write_bytes(b"old")
    seed.chmod(0o644)
    write_seed(seed, CloudInit(ssh_keys=[KEY_A]), hostname="vm1")
    assert stat.S_IMODE(seed.stat().st_mode) == 0o600
    assert "Volume id: cidata" in isoinfo("-d", "-i", str(seed))


def test_a_failed_write_leaves_nothing_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def fail(argv: list[str], **_: object) -> str:
        raise ProcessFailure("genisoimage failed", argv, 1, ["no space left"])

    monkeypatch.setattr(cloudinit, "run", fail)
    with pytest.raises(ProcessFailure):
        write_seed(tmp_path / "cidata.img", CloudInit(ssh_keys=[KEY_A]), hostname="vm1")
    assert list(tmp_path.iterdir()) == []


def test_missing_genisoimage_says_how_to_install_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(shutil, "which", lambda _: None)
    with pytest.raises(ToolMissing, match="apt-get install genisoimage"):
        write_seed(tmp_path / "cidata.img", CloudInit(ssh_keys=[KEY_A]), hostname="vm1")
