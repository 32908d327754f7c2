"""Options shared by the sub-commands that talk to a Triton."""

from __future__ import annotations

import argparse

from geadmin import settings
from geadmin.triton import DEFAULT_TIMEOUT_S, TritonClient


def add_connection_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--url",
        default=None,
        help="Triton endpoint: http://host:8000 or grpc://host:8001 "
        f"(env GEADMIN_TRITON_URL, default {settings.DEFAULT_TRITON_URL})",
    )
    parser.add_argument(
        "--admin-key",
        default=None,
        help="key for Triton's restricted APIs (env GEADMIN_ADMIN_KEY)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT_S,
        help=f"seconds to wait for each answer (default {DEFAULT_TIMEOUT_S:g})",
    )


def client_from_args(args: argparse.Namespace) -> TritonClient:
    return TritonClient(
        args.url or settings.triton_url(),
        admin_key=args.admin_key or settings.admin_key(),
        timeout_s=args.timeout,
    )
