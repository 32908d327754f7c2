"""The last measured sweep per model and server, kept in the workspace
(`$GEADMIN_HOME/capacity/<hash>.json`, written atomically) so a later report says
"measured at T" instead of measuring again. A file that cannot be read is treated as absent
(the report then says the rate is not measured) and never trusted for another model."""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timezone
from pathlib import Path

from geadmin import settings
from geadmin.diagnose.capacity import MEASURED_NOW, Saturation
from geadmin.domain import same_server
from geadmin.repository.atomic import atomic_write

DIRECTORY = "capacity"
MAX_BYTES = 1 << 20


def _path(home: Path, model: str, server: str) -> Path:
    key = hashlib.sha256(f"{server}\0{model}".encode()).hexdigest()[:24]
    return home / DIRECTORY / f"{key}.json"


def save(result: Saturation, server: str, *, home: Path | None = None) -> Path:
    workspace = home or settings.home()
    path = _path(workspace, result.model, server)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, json.dumps({"server": server, **result.to_json()}).encode())
    return path


def latest(model: str, server: str, *, home: Path | None = None, max_age_s: float | None = None,
           now: datetime | None = None) -> Saturation | None:
    """The saved sweep of `model` on `server`, its source "measured at T (...)"; None when there
    is none, it is older than `max_age_s`, or it cannot be read."""
    path = _path(home or settings.home(), model, server)
    try:
        if path.stat().st_size > MAX_BYTES:
            return None
        data = json.loads(path.read_text())
        stored_server = data.pop("server")
        found = Saturation.from_json(data)
        at = datetime.fromisoformat(found.measured_at)
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return None
    if found.model != model or not same_server(str(stored_server), server):
        return None
    age = ((now or datetime.now(timezone.utc)) - at).total_seconds()
    if max_age_s is not None and age > max_age_s:
        return None
    when = f"measured at {at:%Y-%m-%d %H:%M} UTC"
    source = found.source.replace(MEASURED_NOW, when, 1) if found.source.startswith(MEASURED_NOW) \
        else found.source
    return Saturation(**{**found.__dict__, "source": source})
