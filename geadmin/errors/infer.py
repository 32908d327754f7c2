"""Test-inference inputs."""

from __future__ import annotations

from geadmin.errors.base import GeAdminError


class InferInputError(GeAdminError):
    """A test-inference input that does not fit the model (dtype, shape, undecodable data)."""


class InputTooLargeError(InferInputError):
    """An uploaded file or a requested tensor over geadmin's size limit."""
