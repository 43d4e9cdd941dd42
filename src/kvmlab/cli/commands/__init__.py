"""kvmlab's commands, one module per group; importing this package registers them on
:data:`kvmlab.cli.app.app`, in the order ``kvmlab --help`` lists them."""

import importlib

from kvmlab.cli.app import app
from kvmlab.cli.libvirtd_cmd import libvirtd_app
from kvmlab.cli.tune_cmd import tune_app

GROUPS = ("lab_files", "host", "labs", "exits", "migration", "benchmarks")
"""The command modules, in help order (each registers its commands when imported)."""

for _group in GROUPS:
    importlib.import_module(f"{__name__}.{_group}")
app.add_typer(tune_app, name="tune")
app.add_typer(libvirtd_app, name="libvirtd")
