"""`geadmin config`: change model configs safely (apply, history, rollback)."""

from __future__ import annotations

import argparse

from geadmin.cli import config_history


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "config", help="apply, list and roll back model configs (atomic, audited)",
        description="Change a model's config.pbtxt safely: apply with automatic rollback when "
        "Triton rejects it, list its revisions, roll back to one.")
    actions = parser.add_subparsers(dest="config_command", required=True, metavar="ACTION")
    config_history.register_config_subcommands(actions)
