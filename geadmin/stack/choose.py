"""Pick the Stack page's driver from how the dashboard was started (GEADMIN_STACK)."""

from __future__ import annotations

from geadmin import settings
from geadmin.errors import ConfigError
from geadmin.stack.drivers import StackDriver
from geadmin.stack.local import LocalDriver
from geadmin.stack.workspace import Workspace


def choose_driver() -> StackDriver | None:
    """compose when GEADMIN_STACK=compose (or auto with GEADMIN_COMPOSE_PROJECT set), local
    when a `geadmin up` runs on the workspace, else None: the dashboard manages no stack."""
    mode = (settings.STACK.get() or "auto").strip().lower()
    if mode not in ("auto", "local", "compose"):
        raise ConfigError(f"GEADMIN_STACK={mode!r}: expected auto, local or compose")
    project = settings.COMPOSE_PROJECT.get()
    if mode == "compose" or (mode == "auto" and project):
        if not project:
            raise ConfigError("GEADMIN_STACK=compose needs GEADMIN_COMPOSE_PROJECT (the compose "
                              "project name, `docker compose ls` shows it)")
        from geadmin.stack.compose import ComposeDriver

        return ComposeDriver(project, docker=settings.DOCKER.get() or "docker")
    workspace = Workspace(settings.home())
    if mode == "local" or workspace.live_stack() is not None:
        return LocalDriver(workspace)
    return None
