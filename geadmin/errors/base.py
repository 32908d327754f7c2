"""The root of the tree, and the two errors of what was asked: geadmin's settings, one request's arguments."""

from __future__ import annotations


class GeAdminError(Exception):
    """Base of every error geadmin raises on purpose."""


class ConfigError(GeAdminError):
    """geadmin's own settings (flags, env vars, settings files) are invalid."""


class InvalidArgumentError(GeAdminError):
    """An argument of one request (a command's flag, a page's field) is malformed or out of
    bounds: a duration, a threshold, a wave size. Nothing was done; geadmin's own settings are
    `ConfigError`."""
