"""The embedded stack and its drivers (`geadmin up`, compose)."""

from __future__ import annotations

from geadmin.errors.base import GeAdminError


class StackError(GeAdminError):
    """The embedded stack could not be started or stopped cleanly."""


class TritonBinaryNotFoundError(StackError):
    pass


class PythonStubMissingError(StackError):
    pass


class PortInUseError(StackError):
    def __init__(self, message: str, port: int) -> None:
        super().__init__(message)
        self.port = port


class TritonStartError(StackError):
    def __init__(self, message: str, log_tail: str = "") -> None:
        super().__init__(message + (f"\n--- last lines of the Triton log ---\n{log_tail}"
                                    if log_tail else ""))
        self.log_tail = log_tail


class ServiceNotFoundError(StackError):
    """A stack driver was asked about a service the stack does not have."""


class DockerError(StackError):
    """A docker / docker-compose command failed; the message carries its stderr."""


class DockerUnavailableError(DockerError):
    """No docker CLI on PATH, or no Docker engine answers it."""
