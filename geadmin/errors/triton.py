"""Talking to a running Triton (geadmin.triton.translate maps every client error to one of these)."""

from __future__ import annotations

from typing import Generic, Protocol, TypeVar

from geadmin.errors.base import GeAdminError


class Explained(Protocol):
    """What an explained load error carries: a `geadmin.domain.Explanation`. geadmin.errors imports
    nothing else of geadmin (it is the bottom of the layers), so the payload is typed by what it does."""

    def summary(self) -> str: ...


ExplanationT = TypeVar("ExplanationT", bound=Explained)


class TritonError(GeAdminError):
    """A request to a running Triton failed."""

    def __init__(self, message: str, *, url: str = "", status: int | None = None) -> None:
        super().__init__(message)
        self.url, self.status = url, status


class TritonUnreachableError(TritonError):
    pass


class WrongProtocolError(TritonUnreachableError):
    """HTTP sent to a gRPC port, or the reverse, or another service answers there: the URL's
    scheme or port is wrong."""


class TritonNotAskedError(TritonUnreachableError):
    """A read not sent: the server answered nothing to a server-level question moments ago
    (geadmin.triton.silence). Nothing reached Triton, as with a refused connection."""


class ConnectionsBusyError(TritonNotAskedError):
    """Not sent: every connection geadmin keeps to the server was busy (long loads) for the
    call's whole wait. Says nothing of the server, so it opens no hold; never a timeout, which
    callers read as "sent, and may still be running" (an apply's load would say so)."""


class TritonTimeoutError(TritonError):
    pass


class ExplainedLoadTimeoutError(TritonTimeoutError, Generic[ExplanationT]):
    """A load that did not finish in time, with what the log and the repository show."""

    def __init__(self, explanation: ExplanationT, *, url: str = "", status: int | None = None) -> None:
        super().__init__(explanation.summary(), url=url, status=status)
        self.explanation = explanation


class ForbiddenError(TritonError):
    pass


class ModelNotFoundError(TritonError):
    pass


class LoadFailedError(TritonError):
    pass


class ExplainedLoadError(LoadFailedError, Generic[ExplanationT]):
    """A failed load with what geadmin found out about it: log lines, layout, what still serves."""

    def __init__(self, explanation: ExplanationT, *, url: str = "", status: int | None = None) -> None:
        super().__init__(explanation.summary(), url=url, status=status)
        self.explanation = explanation


class TritonRequestError(TritonError):
    pass


class AnswerTooLargeError(TritonRequestError):
    """An answer larger than geadmin reads from one (geadmin.triton.connection): not a Triton,
    or one that would fill the dashboard's memory."""
