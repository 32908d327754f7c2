"""geadmin's settings: one name per setting, read from the CLI flag or `GEADMIN_<NAME>`.

A flag wins over its environment variable, which wins over the default. Every setting is
listed in the README's configuration table.
"""

from __future__ import annotations

import os
from pathlib import Path

from geadmin.errors import ConfigError

DEFAULT_TRITON_URL = "http://127.0.0.1:8000"


def env(name: str, default: str | None = None) -> str | None:
    value = os.environ.get(f"GEADMIN_{name}")
    return value if value not in (None, "") else default


def is_port(value: int) -> bool:
    return 0 < value < 65536


def env_int(name: str, default: int) -> int:
    raw = env(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(f"GEADMIN_{name} must be an integer, got {raw!r}") from None
    if name.endswith("PORT") and not is_port(value):
        raise ConfigError(f"GEADMIN_{name} must be a port between 1 and 65535, got {value}")
    return value


def home() -> Path:
    """The workspace directory (model repository copy, logs, history and audit databases)."""
    raw = env("HOME")
    if raw:
        return Path(raw).expanduser()
    data_home = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data_home) / "geadmin"


def triton_url() -> str:
    return env("TRITON_URL", DEFAULT_TRITON_URL) or DEFAULT_TRITON_URL


def admin_key() -> str | None:
    return env("ADMIN_KEY")
