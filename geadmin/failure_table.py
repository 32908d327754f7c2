"""One boundary's failures in one table, read the same way for every boundary.

A `FailureTable` maps what a dependency says (lower-cased substrings of its output, first
match wins) or raises (exception classes, first isinstance match wins, so subclasses come
first) to one `Failure` of the boundary's enum, and every `Failure` to the geadmin error
class and the message template that names cause and next step. perf_analyzer
(`geadmin.ops.bench.failures`) and the docker CLI (`geadmin.stack.docker_cli`) are two; a new
boundary (npu-smi, SQLite) is one more table, with a test that walks every row.
"""

from __future__ import annotations

import enum
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar

from geadmin.errors import GeAdminError

# What a socket raises when nothing (or nothing any more) answers at an address: "unreachable"
# to every boundary that talks over one (Triton's client, the metrics scrape).
CONNECTION_FAILURES: tuple[type[OSError], ...] = (
    ConnectionRefusedError, ConnectionResetError, ConnectionAbortedError, BrokenPipeError, socket.gaierror)

F = TypeVar("F", bound=enum.Enum)
E = TypeVar("E", bound=GeAdminError)


@dataclass(frozen=True)
class FailureTable(Generic[F, E]):
    markers: tuple[tuple[str, F], ...]  # lower-cased output substring -> failure, first match wins
    exceptions: tuple[tuple[type[BaseException], F], ...]  # first isinstance match wins
    messages: Mapping[F, tuple[type[E], str]]  # failure -> error class, str.format template
    other: F  # what nothing above matches

    def __post_init__(self) -> None:
        missing = [failure.name for failure in type(self.other) if failure not in self.messages]
        if missing:
            raise TypeError(f"no error message for {', '.join(missing)}")

    def classify(self, exc: BaseException | None = None, output: str = "") -> F:
        """The failure `exc` is (when given), else the one `output` names."""
        if exc is not None:
            return next((failure for kind, failure in self.exceptions if isinstance(exc, kind)), self.other)
        lowered = output.lower()
        return next((failure for marker, failure in self.markers if marker in lowered), self.other)

    def render(self, failure: F, **fields: object) -> tuple[type[E], str]:
        """The error class and the message of `failure`, its template filled with `fields`."""
        error_type, template = self.messages[failure]
        return error_type, template.format(**fields)

    def error(self, failure: F, **fields: object) -> E:
        error_type, message = self.render(failure, **fields)
        return error_type(message)
