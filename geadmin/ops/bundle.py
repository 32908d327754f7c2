"""The diagnostics bundle: one `.tar.gz` an operator attaches to a ticket.

It holds what a model owner or Triton expert asks for first, collected in one go — and it
is written even when Triton is down (then it says so, and holds what the disk and the log
show). Every secret geadmin knows (`known_secrets`: the admin keys, the secret settings, the
servers file's keys) is redacted from every file in it.

    manifest.json                     what is inside, what could not be collected and why
    verdict.json                      OK / DEGRADED / DOWN and its reasons (`diagnose.evidence.assess`,
                                      what `geadmin status` and the Overview show), drift included
    server/metadata.json health.json index.json statistics.json
    models/<name>/config.pbtxt        as written on disk
    models/<name>/config.normalized.json   as Triton normalized it (loaded models)
    logs/tritonserver.log             the end of Triton's log: at most `log_bytes`, from a line start
    containers/services.json          a compose stack's services: state, restarts, last exit (when the
                                      server is the compose project's: geadmin.stack.compose_logs)
    containers/<service>.log          the end of each service's container log (`docker logs`)
    geadmin/settings.json             geadmin's version and every GEADMIN_* setting (secrets: set / not set)
    geadmin/stack.json                the running embedded stack, if any
    host/npu-smi-info.txt             `npu-smi info`, when the command exists
    host/platform.json                OS, Python, machine
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, is_dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Protocol

from google.protobuf import json_format

from geadmin import __version__, settings
from geadmin.diagnose.evidence import EvidenceSources, assess
from geadmin.diagnose.health import take_snapshot
from geadmin.errors import GeAdminError, RepositoryError
from geadmin.repository.layout import is_model_name
from geadmin.repository.modelconfig import CONFIG_FILE, read_config_bytes
from geadmin.triton.client import TritonClient
from geadmin.triton.logs import LocalLogFile, LogSource
from geadmin.triton.servers import load_servers

DEFAULT_LOG_BYTES = 5 << 20
# The configs on disk, all models together: a repository of thousands of 4 MiB configs would
# otherwise be held in memory whole; past it each model is named in the manifest, not packed.
MAX_CONFIGS_BYTES = 64 << 20
CONTAINER_LOG_LINES = 2000
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")
NPU_SMI_TIMEOUT_S = 10.0
REDACTED = "<redacted>"


class Containers(Protocol):
    """A compose project's services (geadmin.stack.compose.ComposeDriver; ops does not import
    the stack layer, which runs ops)."""

    project: str

    def services(self) -> Sequence[Any]: ...

    def logs(self, service: str, tail: int = 200) -> list[str]: ...


@dataclass
class Bundle:
    """The archive's files before packing: path inside the archive -> bytes."""

    files: dict[str, bytes] = field(default_factory=dict)
    problems: dict[str, str] = field(default_factory=dict)  # section -> why it is missing
    secrets: tuple[str, ...] = ()

    def redact(self, text: str) -> str:
        """`text` without any secret: as written, and as JSON escapes it (a key with a quote,
        a backslash or a control character); the longest first, so a secret that contains
        another is not left half-visible."""
        forms = {form for secret in self.secrets
                 for form in (secret, json.dumps(secret, ensure_ascii=False)[1:-1])}
        for form in sorted(forms, key=len, reverse=True):
            text = text.replace(form, REDACTED)
        return text

    def add_text(self, path: str, text: str) -> None:
        self.files[path] = self.redact(text).encode("utf-8")

    def add_json(self, path: str, data: Any) -> None:
        self.add_text(path, json.dumps(data, indent=2, default=str, ensure_ascii=False) + "\n")

    def note(self, section: str, why: str) -> None:
        """Record that `section` could not be collected (shown in the manifest and by the CLI)."""
        self.problems[section] = self.redact(why)

    def collect(self, section: str, fn: Callable[[], None]) -> None:
        """Run one collector; a failure is recorded in the manifest, never fatal."""
        try:
            fn()
        except (GeAdminError, OSError, subprocess.SubprocessError, ValueError) as exc:
            self.note(section, str(exc))

    def packed(self) -> bytes:
        buffer = io.BytesIO()
        now = time.time()
        with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
            for path, data in sorted(self.files.items()):
                info = tarfile.TarInfo(f"geadmin-bundle/{path}")
                info.size, info.mtime, info.mode = len(data), int(now), 0o644
                archive.addfile(info, io.BytesIO(data))
        return buffer.getvalue()


def build_bundle(
    client: TritonClient,
    *,
    repository: Path | None = None,
    log_path: Path | None = None,
    stack_file: Path | None = None,
    log_bytes: int = DEFAULT_LOG_BYTES,
    log: LogSource | None = None,
    containers: Containers | None = None,
    metrics_url: str | None = None,
    also: tuple[str, ...] = (),
) -> Bundle:
    """`log`: the log that explains failures when there is no `log_path` (a compose container's);
    `containers`: the compose project that runs this server, whose services and logs go in;
    `metrics_url`: Triton's /metrics, so the verdict weighs what `geadmin status` weighs (npu_ge
    instances that cannot execute, npu_ge's device errors); `also`: the server's other known
    endpoints, where its probes may be recorded (as `geadmin status` reads them)."""
    bundle = Bundle(secrets=known_secrets(client))
    bundle.collect("server", lambda: _server(bundle, client))
    source = LocalLogFile(log_path) if log_path is not None else log
    bundle.collect("verdict", lambda: _verdict(bundle, EvidenceSources(client, source, repository,
                                                                      metrics_url=metrics_url, also=also)))
    bundle.collect("statistics", lambda: bundle.add_json(
        "server/statistics.json", [json_format.MessageToDict(s) for s in client.model_statistics()]))
    bundle.collect("models", lambda: _models(bundle, client, repository))
    bundle.collect("log", lambda: _log(bundle, log_path, log_bytes, containers))
    if containers is not None:
        bundle.collect("containers", lambda: _containers(bundle, containers))
    bundle.collect("settings", lambda: _settings(bundle, client, stack_file))
    bundle.collect("npu-smi", lambda: _npu_smi(bundle))
    bundle.add_json("host/platform.json", {"system": platform.platform(), "python": sys.version,
                                           "machine": platform.machine()})
    bundle.add_json("manifest.json", {
        "geadmin_version": __version__,
        "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "triton_url": client.url,
        "files": sorted([*bundle.files, "manifest.json"]),
        "not_collected": bundle.problems,
    })
    return bundle


def write_bundle(bundle: Bundle, path: Path) -> Path:
    """Atomically: a temp file beside `path`, renamed into place (never half an archive)."""
    path = path.expanduser()
    data = bundle.packed()
    try:
        blocker = next((p for p in path.parents if p.exists() and not p.is_dir()), None)
        if blocker is not None:
            raise RepositoryError(f"cannot write the bundle to {path}: {blocker} is not a directory")
        if path.is_dir():
            raise RepositoryError(f"cannot write the bundle to {path}: it is a directory")
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, temp = tempfile.mkstemp(prefix=f".{path.name}-", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temp, path)
        except BaseException:
            Path(temp).unlink(missing_ok=True)
            raise
    except OSError as exc:
        reason = exc.strerror or str(exc)
        if exc.filename and Path(exc.filename) != path:
            reason += f" ({exc.filename})"
        raise RepositoryError(f"cannot write the bundle to {path}: {reason}") from exc
    return path


def default_bundle_name() -> str:
    return f"geadmin-bundle-{datetime.now(timezone.utc):%Y%m%d-%H%M%S}.tar.gz"


# -- collectors ------------------------------------------------------------------------
def _server(bundle: Bundle, client: TritonClient) -> None:
    health = client.health()
    bundle.add_json("server/health.json", {"live": health.live, "ready": health.ready})
    info = client.server_info()
    bundle.add_json("server/metadata.json", {"name": info.name, "version": info.version,
                                             "extensions": list(info.extensions)})
    bundle.add_json("server/index.json", [
        {"name": e.name, "version": e.version, "state": e.state.value, "reason": e.reason}
        for e in client.repository_index()])


def _verdict(bundle: Bundle, sources: EvidenceSources) -> None:
    assert sources.client is not None
    verdict = assess(take_snapshot("server", sources.client), sources)
    bundle.add_json("verdict.json", verdict.to_json())


def _models(bundle: Bundle, client: TritonClient, repository: Path | None) -> None:
    names: set[str] = set()
    if repository is None:
        bundle.note("configs on disk", "the served repository is not known (pass --repository)")
    elif not repository.is_dir():
        bundle.note("configs on disk", f"the repository {repository} is not a directory")
    else:
        names |= {p.name for p in repository.iterdir() if p.is_dir() and is_model_name(p.name)}
    try:
        index = [e for e in client.repository_index() if is_model_name(e.name)]
    except GeAdminError as exc:
        bundle.note("normalized configs", str(exc))
        index = []
    names |= {e.name for e in index}
    loaded = {e.name for e in index if e.state.value == "READY"}
    packed = 0
    for name in sorted(names):
        if repository is not None and (repository / name / CONFIG_FILE).exists():
            try:  # the one reader: a link out of the model directory never ends in a ticket
                data = read_config_bytes(repository / name / CONFIG_FILE)
                if packed + len(data) > MAX_CONFIGS_BYTES:
                    raise RepositoryError(f"left out: the configs packed so far reach the bundle's "
                                          f"{MAX_CONFIGS_BYTES >> 20} MiB for configs")
                packed += len(data)
                bundle.add_text(f"models/{name}/{CONFIG_FILE}", data.decode(errors="replace"))
            except (OSError, GeAdminError) as exc:
                bundle.note(f"models/{name}/{CONFIG_FILE}", str(exc))
        if name in loaded:
            try:
                config = client.model_config(name)
            except GeAdminError as exc:
                bundle.note(f"models/{name}", str(exc))
                continue
            bundle.add_json(f"models/{name}/config.normalized.json",
                            json_format.MessageToDict(config, preserving_proto_field_name=True))


def _log(bundle: Bundle, log_path: Path | None, log_bytes: int, containers: Containers | None) -> None:
    if log_path is None:
        instead = " — its container's log is in containers/" if containers is not None else ""
        raise RepositoryError(f"Triton's log file is not known (pass --triton-log){instead}")
    text = _log_tail(log_path, log_bytes).decode("utf-8", errors="replace")
    bundle.add_text("logs/tritonserver.log", text)


def _log_tail(log_path: Path, log_bytes: int) -> bytes:
    """At most the last `log_bytes` of the file. When that cuts a line, the cut line is left
    out: half a line is no use, and half a secret would not be recognized to redact (nor
    half a UTF-8 character decoded). A window holding no line start (one huge line) is kept."""
    with open(log_path, "rb") as log:
        size = log.seek(0, os.SEEK_END)
        start = max(0, size - max(0, log_bytes))
        log.seek(max(0, start - 1))
        data = log.read(size - max(0, start - 1))  # not what the log grew by since
    if start == 0:
        return data
    before, data = data[:1], data[1:]
    cut = data.find(b"\n")
    if before != b"\n" and cut >= 0:
        data = data[cut + 1:]
    return data


def _containers(bundle: Bundle, containers: Containers) -> None:
    """Each service's state and the end of its container's log; a log docker cannot give is
    noted, the others still go in."""
    services = list(containers.services())
    bundle.add_json("containers/services.json", {
        "project": containers.project,
        "services": [asdict(s) if is_dataclass(s) and not isinstance(s, type) else str(s) for s in services]})
    for service in services:
        name = str(getattr(service, "name", service))
        try:
            lines = containers.logs(name, tail=CONTAINER_LOG_LINES)
        except GeAdminError as exc:
            bundle.note(f"containers/{name}", str(exc))
            continue
        safe = _UNSAFE.sub("_", name).lstrip(".") or "_"
        bundle.add_text(f"containers/{safe}.log", "".join(line + "\n" for line in lines))


def known_secrets(client: TritonClient) -> tuple[str, ...]:
    """Every secret this geadmin knows: the server's key, every secret setting's value (the fleet's
    admin key, OIDC's client secret, ...) and each configured server's key — any of them may be
    in a log the bundle collects (a command line, a proxy's error)."""
    found = [client.admin_key, *(setting.raw() for setting in settings.SETTINGS.values() if setting.secret)]
    with contextlib.suppress(GeAdminError, OSError):  # a broken servers file: said in the bundle's settings
        found += [spec.admin_key for spec in load_servers()]
    return tuple(dict.fromkeys(s for s in found if s))


def _settings(bundle: Bundle, client: TritonClient, stack_file: Path | None) -> None:
    values: dict[str, str | None] = {
        setting.env_name: setting.shown() if setting.secret else setting.raw()
        for setting in settings.SETTINGS.values()}
    bundle.add_json("geadmin/settings.json", {
        "geadmin_version": __version__, "triton_url": client.url,
        "admin_key": "set" if client.admin_key else "not set", "environment": values})
    if stack_file is not None and stack_file.is_file():
        bundle.add_text("geadmin/stack.json", stack_file.read_text())


def _npu_smi(bundle: Bundle) -> None:
    binary = shutil.which("npu-smi")
    if binary is None:
        bundle.add_text("host/npu-smi-info.txt", "npu-smi is not installed on this host (no NPU driver)\n")
        return
    done = subprocess.run([binary, "info"], capture_output=True, text=True, encoding="utf-8",
                          errors="replace", timeout=NPU_SMI_TIMEOUT_S, check=False)
    stderr = f"\n[stderr]\n{done.stderr}" if done.stderr else ""
    bundle.add_text("host/npu-smi-info.txt", f"{done.stdout}{stderr}\n[exit code {done.returncode}]\n")
