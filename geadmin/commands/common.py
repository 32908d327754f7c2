"""Options shared by the sub-commands that talk to a Triton."""

from __future__ import annotations

import argparse
from dataclasses import replace

from geadmin import settings
from geadmin.errors import ConfigError
from geadmin.servers import ServerSpec, load_servers
from geadmin.triton import DEFAULT_LOAD_TIMEOUT_S, DEFAULT_TIMEOUT_S, Endpoint, Transport, TritonClient


def add_connection_args(parser: argparse.ArgumentParser) -> None:
    target = parser.add_mutually_exclusive_group()
    target.add_argument(
        "--url",
        default=None,
        help="Triton endpoint: http://host:8000 or grpc://host:8001 "
        f"(env GEADMIN_TRITON_URL, default {settings.DEFAULT_TRITON_URL})",
    )
    target.add_argument(
        "--server",
        default=None,
        metavar="NAME",
        help="a server by name, from GEADMIN_SERVERS_FILE or GEADMIN_TRITON_URLS",
    )
    parser.add_argument(
        "--protocol",
        choices=[t.value for t in Transport],
        default=None,
        help="talk HTTP or gRPC whatever the URL's scheme says (a bare host:port is HTTP)",
    )
    parser.add_argument(
        "--admin-key",
        default=None,
        help="key for Triton's restricted APIs (env GEADMIN_ADMIN_KEY)",
    )
    parser.add_argument(
        "--timeout",
        type=positive_seconds,
        default=DEFAULT_TIMEOUT_S,
        help=f"seconds to wait for each answer (default {DEFAULT_TIMEOUT_S:g})",
    )


def positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 < value < 1e6:  # also rejects nan and inf
        raise argparse.ArgumentTypeError(f"seconds must be more than 0, got {text}")
    return value


def server_from_args(args: argparse.Namespace) -> ServerSpec:
    """--url, else --server NAME from the configured servers, else GEADMIN_TRITON_URL."""
    if args.url:
        return ServerSpec(args.url, args.url, args.admin_key or settings.admin_key())
    if args.server:
        specs = load_servers()
        spec = next((s for s in specs if s.name == args.server), None)
        if spec is None:
            known = ", ".join(s.name for s in specs)
            raise ConfigError(f"no server named {args.server!r}; configured: {known}")
        return replace(spec, admin_key=args.admin_key or spec.admin_key)
    return ServerSpec("default", settings.triton_url(), args.admin_key or settings.admin_key())


def client_for(spec: ServerSpec, args: argparse.Namespace) -> TritonClient:
    spec = with_protocol(spec, getattr(args, "protocol", None))
    return TritonClient(spec.url, admin_key=spec.admin_key, timeout_s=args.timeout,
                        load_timeout_s=getattr(args, "load_timeout", DEFAULT_LOAD_TIMEOUT_S))


def client_from_args(args: argparse.Namespace) -> TritonClient:
    return client_for(server_from_args(args), args)


def with_protocol(spec: ServerSpec, protocol: str | None) -> ServerSpec:
    if not protocol:
        return spec
    endpoint = replace(Endpoint.parse(spec.url), transport=Transport(protocol))
    return replace(spec, url=endpoint.url)
