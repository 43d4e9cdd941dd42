"""A domain kvmlab did not write (hand-written XML, defined and started with ``virsh`` on a
private libvirtd), beside a QEMU started by hand and a guest of kvmlab's own: ``ps --all``
lists all three by the names ``exits`` takes; the domain is profiled by name (TCG here:
kvmlab says what TCG cannot show); ``diagnose`` reads the domain's own XML and prints its
fix as a diff of that XML with the ``virsh`` steps; ``--apply`` changes only the persistent
definition (checked with ``virsh dumpxml``, live and inactive), leaving the running VM as it
was."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import cli
from tests.libvirt_backend.conftest import Daemon
from tests.readme import readme_line

pytestmark = pytest.mark.functional

DATA = Path(__file__).resolve().parents[1] / "exits" / "data"
REPORT = DATA / "perf-kvm-stat-report-timer-storm-l2.txt"
"""A perf kvm stat report of the timer storm, recorded under KVM: the profile of the VM as
if taken where it runs under KVM (here it runs under TCG, which has no VM exits)."""

NAME = "handwritten"
DOMAIN = f"""<domain type='qemu'>
  <name>{NAME}</name>
  <memory unit='MiB'>64</memory>
  <vcpu>1</vcpu>
  <os>
    <type arch='x86_64' machine='q35'>hvm</type>
  </os>
  <clock offset='utc'>
    <timer name='kvmclock' present='no'/>
    <timer name='hpet' present='no'/>
  </clock>
  <on_reboot>destroy</on_reboot>
  <devices>
    <emulator>/usr/bin/qemu-system-x86_64</emulator>
  </devices>
</domain>
"""
AGENTFUL = """<domain type='qemu'>
  <name>agentful</name>
  <memory unit='MiB'>256</memory>
  <vcpu>1</vcpu>
  <os>
    <type arch='x86_64' machine='q35'>hvm</type>
    <kernel>{kernel}</kernel>
    <initrd>{initrd}</initrd>
    <cmdline>console=ttyS0 quiet panic=-1 kvmlab.share=9p kvmlab.tag=hostfs</cmdline>
  </os>
  <on_reboot>destroy</on_reboot>
  <devices>
    <emulator>/usr/bin/qemu-system-x86_64</emulator>
    <filesystem type='mount' accessmode='passthrough'>
      <source dir='/'/>
      <target dir='hostfs'/>
      <readonly/>
    </filesystem>
    <channel type='unix'>
      <target type='virtio' name='org.qemu.guest_agent.0'/>
    </channel>
  </devices>
</domain>
"""
"""A domain with a guest agent (kvmlab's image kernel, copied where libvirt's QEMU user
reads it): ``ps --all`` shows its guest CPU."""
TINY_LAB = """name = "beside"
[guests.vm]
vcpus = 1
memory = "256M"
"""


def virsh(uri: str, *args: str) -> str:
    done = subprocess.run(["virsh", "-c", uri, *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture
def agentful(libvirtd: Daemon, open_dir: Path) -> Iterator[str]:
    """A hand-written domain booting kvmlab's image, its agent on a virtio channel."""
    rendered = cli(libvirtd.env, "render", "basic", "-o", "json")
    argv = json.loads(rendered.stdout)["guests"][0]["argv"]
    paths = {}
    for option in ("-kernel", "-initrd"):
        source = Path(argv[argv.index(option) + 1])
        paths[option[1:]] = open_dir / source.name
        shutil.copyfile(source, paths[option[1:]])
        paths[option[1:]].chmod(0o644)
    xml = open_dir / "agentful.xml"
    xml.write_text(AGENTFUL.format(**paths))
    virsh(libvirtd.uri, "define", str(xml))
    try:
        virsh(libvirtd.uri, "start", "agentful")
        yield "agentful"
    finally:
        subprocess.run(["virsh", "-c", libvirtd.uri, "destroy", "agentful"], capture_output=True)
        subprocess.run(["virsh", "-c", libvirtd.uri, "undefine", "agentful"], capture_output=True)


@pytest.fixture
def domain(libvirtd: Daemon, open_dir: Path) -> Iterator[str]:
    """The hand-written domain, defined and running; destroyed and undefined afterwards."""
    xml = open_dir / f"{NAME}.xml"
    xml.write_text(DOMAIN)
    virsh(libvirtd.uri, "define", str(xml))
    try:
        virsh(libvirtd.uri, "start", NAME)
        yield NAME
    finally:
        subprocess.run(["virsh", "-c", libvirtd.uri, "destroy", NAME], capture_output=True)
        subprocess.run(["virsh", "-c", libvirtd.uri, "undefine", NAME], capture_output=True)


def test_a_domain_kvmlab_did_not_write_is_listed_profiled_and_fixed_in_its_own_xml(
    libvirtd: Daemon, domain: str, agentful: str, tmp_path: Path
) -> None:
    uri, env = libvirtd.uri, libvirtd.env
    handmade = subprocess.Popen(
        [
            "qemu-system-x86_64",
            "-name",
            "guest=byhand",
            "-accel",
            "tcg",
            "-m",
            "64",
            "-display",
            "none",
            "-nodefaults",
            "-S",
        ]
    )
    lab = tmp_path / "beside.toml"
    lab.write_text(TINY_LAB)
    try:
        up = cli(env, "up", str(lab), timeout=900)
        assert up.returncode == 0, up.stderr[-3000:]

        # ps --all: kvmlab's guest, the libvirt domain and the QEMU started by hand at once
        shown = cli(env, "ps", "--all", "-o", "json")
        assert shown.returncode == 0, shown.stderr
        doc = json.loads(shown.stdout)
        assert [g["address"] for g in doc["guests"]] == ["beside/vm"]
        others = {row["target"]: row for row in doc["others"]}
        assert others[f"domain:{domain}"]["origin"] == "libvirt"
        pid = others[f"domain:{domain}"]["pid"]
        assert others[f"pid:{handmade.pid}"]["origin"] == "other"
        assert others[f"pid:{handmade.pid}"]["name"] == "byhand"
        assert others[f"domain:{domain}"]["guest_cpu_pct"] is None  # no agent: unknown
        assert others[f"pid:{handmade.pid}"]["guest_cpu_pct"] is None
        deadline = time.monotonic() + 300
        while True:  # the agentful domain's agent answers once its guest is up
            rows = json.loads(cli(env, "ps", "--all", "-o", "json").stdout)["others"]
            row = next(r for r in rows if r["target"] == f"domain:{agentful}")
            if row["guest_cpu_pct"] is not None:
                break
            assert time.monotonic() < deadline, "its guest agent never answered"
            time.sleep(1)
        assert 0 <= row["guest_cpu_pct"] <= 100 * 1.5, row
        text = cli(env, "ps", "--all").stdout
        assert "unknown" in next(x for x in text.splitlines() if x.startswith(f"domain:{domain}"))

        # profiled by name: TCG has no VM exits, and kvmlab says so and what shows its CPU
        exits = cli(env, "exits", f"domain:{domain}", "-c", uri, "-s", "1")
        assert exits.returncode == 4, exits.stderr
        assert f"pid:{pid} ({domain}) runs under tcg" in exits.stderr
        assert "--host-profile" in exits.stderr

        # diagnosed against its own XML (the profile: a storm recorded under KVM)
        readme = [a.replace("win10", domain) for a in readme_line("kvmlab diagnose domain:")]
        args = [*readme, "-c", uri, "--import", str(REPORT), "-s", "1"]
        diag = cli(env, *args)
        assert diag.returncode == 0, diag.stderr
        assert "the rules read domain handwritten's definition" in diag.stdout
        assert "fix in its domain XML:" in diag.stdout, diag.stdout
        assert '-    <timer name="kvmclock" present="no" />' in diag.stdout
        assert '+    <timer name="kvmclock" present="yes" />' in diag.stdout
        assert f"virsh -c {uri} shutdown {domain}" in diag.stdout
        as_json = json.loads(cli(env, *args, "-o", "json").stdout)
        storm = next(f for f in as_json["findings"] if f["rule"] == "acpi-pm-timer-reads")
        assert storm["own_fix"]["kind"] == "domain" and storm["own_fix"]["exact"] is True
        assert virsh(uri, "dumpxml", "--inactive", domain).count("present='no'") == 2

        # --apply: the persistent definition only, after the diff; the VM keeps running
        applied = cli(env, *args, "--apply")
        assert applied.returncode == 0, applied.stderr
        assert f"defined domain {domain} on {uri}" in applied.stderr
        assert "restart it for the fix to take effect" in applied.stderr
        inactive = virsh(uri, "dumpxml", "--inactive", domain)
        assert "<timer name='kvmclock' present='yes'/>" in inactive
        assert "<timer name='hpet' present='no'/>" in inactive
        live = virsh(uri, "dumpxml", domain)
        assert "<timer name='kvmclock' present='no'/>" in live
        assert virsh(uri, "domstate", domain).strip() == "running"
        assert Path(f"/proc/{pid}").exists(), "the running VM was not restarted"
        again = cli(env, *args, "--apply")  # the definition has the fix: nothing left to set
        assert again.returncode == 2, again.stderr
        assert "nothing to apply: no finding has a lab-file fix" in again.stderr
        assert virsh(uri, "dumpxml", "--inactive", domain) == inactive

        # refusals, one line each
        gone = cli(env, "diagnose", "domain:nosuch", "-c", uri, "-s", "1")
        assert gone.returncode == 2 and gone.stderr.count("\n") == 1, gone.stderr
        assert "no running domain 'nosuch'" in gone.stderr
        hand = cli(env, "diagnose", f"pid:{handmade.pid}", "--apply", "-s", "1")
        assert hand.returncode == 2 and "change its command line" in hand.stderr
        assert handmade.poll() is None
    finally:
        handmade.kill()
        handmade.wait()
        down = cli(env, "down", "beside", timeout=300)
        assert down.returncode == 0 or "no lab" in down.stderr, down.stderr
    assert not (libvirtd.root / "beside").exists()
