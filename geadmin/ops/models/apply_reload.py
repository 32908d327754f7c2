"""Triton's answer to a config an apply wrote: the reload, checked, or the previous file put back.

Steps 3 and 4 of `geadmin.ops.models.apply`, once the new file is on disk:

- Reload through Triton's repository API, explained (`geadmin.ops.models.explained_load`). Triton
  keeps the previous version serving while it tries the new one (blue/green, FACTS.md).
- If Triton rejects it (or does not answer, or the load hangs), put the previous file back,
  byte for byte, read it back to check, and return the real reason. A model that served
  before and serves no more (Triton unloads an ensemble whose new config it refuses) is
  loaded again from the restored file, and the outcome says whether it serves.
- A load still running at the load timeout keeps the new file: Triton read it when the load
  began, so the old one put back would leave Triton serving, once the load ends, a config no
  file holds; the outcome is `unfinished`, with the revision to roll back to.
- After a success, ask Triton what serves and whether its live config carries every field of
  the file. A reload Triton answers with success may have read another file: when the live
  config still has the previous value of every field the change sets
  (`geadmin.ops.models.took_effect`), Triton did not load this one (most likely `--repository`
  is not the repository it serves), and the previous file is put back.
- With `smoke=True`, send one request of zeros (geadmin.ops.infer.request.smoke_request):
  if the model loaded but does not answer, the previous file is put back and reloaded the same way.
- Cut short (Ctrl-C, SIGTERM) once the started row is written (`cut_short`): the previous file
  is put back, and loaded again when Triton was asked to load the new one.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from tritonclient.grpc.model_config_pb2 import ModelConfig

from geadmin.access.guard import Authorization
from geadmin.db import WorkspaceDatabaseError
from geadmin.diagnose import explain
from geadmin.diagnose.explain import LoadWatch
from geadmin.domain import Explanation, Serving
from geadmin.errors import (
    ConfigConflictError,
    ExplainedLoadTimeoutError,
    GeAdminError,
    RepositoryError,
    TritonError,
    TritonRequestError,
    TritonTimeoutError,
)
from geadmin.ops.infer.request import smoke_request
from geadmin.ops.models.apply_result import ApplyOutcome, ApplyResult
from geadmin.ops.models.explained_load import LoadProgress, load_explained
from geadmin.ops.models.took_effect import uptake
from geadmin.repository import revisions, store
from geadmin.repository.knobs import compare_with_live
from geadmin.repository.modelconfig import CONFIG_FILE
from geadmin.repository.store import ConfigFile
from geadmin.triton.client import TritonClient
from geadmin.triton.logs import LogSource


def holds(repository: Path, model: str, data: bytes) -> bool:
    """Check, don't assume: is `data` what the model's config file holds now."""
    try:
        return store.read_config(repository, model).data == data
    except RepositoryError:
        return False


@dataclass
class ConfigReload:
    """A new config an apply wrote over `current`: reloaded through Triton and checked, or taken back."""

    client: TritonClient
    repository: Path
    model: str
    data: bytes  # the new config, on disk
    current: ConfigFile  # the previous config: what the way back puts back
    new_sha: str
    before: LoadWatch  # what served before the write
    diff: str
    who: str
    home: Path | None
    log: LogSource | None
    progress: LoadProgress | None
    auth: Authorization | None  # the caller's, for the loads this reload makes
    smoke: bool
    unconfirmed: tuple[str, ...] = ()  # restores that are on disk (read back) but raised after the rename

    def run(self) -> ApplyResult:
        """Reload, then check what serves (and, `smoke`, a test request); restore on a refusal."""
        try:
            load_explained(self.client, self.model, log=self.log, repository=self.repository,
                           progress=self.progress, auth=self.auth)
        except ExplainedLoadTimeoutError as exc:
            if exc.explanation.unfinished:
                return self.still_loading(exc)
            return self.restore(exc)
        except GeAdminError as exc:
            return self.restore(exc)
        result = self.verified()
        if self.smoke and result.outcome is ApplyOutcome.APPLIED:
            check = smoke_request(self.client, self.model)
            if not check.ok:
                failed = TritonRequestError(f"the new config of {self.model!r} loaded, but a test request "
                                            f"failed: {check.reason}")
                return self.restore(failed, reload=True)
            result = replace(result, message=f"{result.message}; a test request answered in "
                                             f"{check.latency_ms or 0:.1f} ms")
        return result

    def verified(self) -> ApplyResult:
        """Check, don't assume: what serves now, and does Triton's live config carry the file's
        fields. When it still has the previous value of every field the change sets, Triton did
        not load this file (`geadmin.ops.models.took_effect`): the previous one is put back."""
        serving, version, serving_error = explain.check_serving(self.client, self.before)
        warnings = [f"could not check what serves {self.model!r}: {serving_error}"] if serving_error else []
        try:
            live = self.client.model_config(self.model)
        except TritonError as exc:
            live = None
            warnings.append(f"could not read the live config of {self.model!r} back: {exc}")
        if live is not None:
            found = uptake(self.current.data, self.data, live)
            if found.none_took:
                # reloaded too: had Triton read the file after all (a backend that sets the field
                # itself), what serves must be what the file on disk says again
                return self.restore(self.not_loaded(found.still_old), reload=True,
                                    fix="Triton's config is unchanged; apply again to the repository it "
                                    "serves")
            warnings += self.live_differences(live)
        if serving is Serving.PREVIOUS:
            message = (f"applied the new config of {self.model!r}: Triton reloaded it, and version "
                       f"{version} serves it")
        else:
            message = f"applied the new config of {self.model!r}, but Triton now says: {serving.value}"
        return ApplyResult(self.model, ApplyOutcome.APPLIED, message, self.diff, self.current.sha256,
                           self.new_sha, serving=serving, serving_version=version, warnings=tuple(warnings))

    def not_loaded(self, fields: tuple[str, ...]) -> RepositoryError:
        return RepositoryError(
            f"Triton's live config ignores the change geadmin wrote to {self.current.path}: after the "
            f"reload its config of {self.model!r} still has the previous value of {', '.join(fields)}, "
            f"most likely because {self.repository} is not the repository this Triton serves (or the "
            "model's backend sets those fields itself) — fix: pass the repository it serves "
            f"(--repository / GEADMIN_REPOSITORY), or --url for the server that serves {self.repository}")

    def live_differences(self, live: ModelConfig) -> list[str]:
        differing = compare_with_live(self.data.decode("utf-8"), live)
        if differing.same:
            return []
        return [f"Triton's live config of {self.model!r} differs from the file in "
                f"{', '.join(differing.differing)} (Triton may have normalized them; compare with GET "
                f"/v2/models/{self.model}/config)"]

    def still_loading(self, error: ExplainedLoadTimeoutError) -> ApplyResult:
        """The load goes on in Triton past the load timeout: the new file, which Triton is
        loading, stays; the previous config is the revision the store kept before the write."""
        serving, version, _ = explain.check_serving(self.client, self.before)
        kept = revisions.revision_with_hash(self.repository, self.model, self.current.sha256, self.home)
        back = f"`geadmin config rollback {self.model}{f' {kept.number}' if kept else ''}`"
        line = (f"  the new {CONFIG_FILE} stays on disk: Triton is loading it, and {serving.value}; "
                f"`geadmin status` names the model until the load ends, and says OK when the change took; "
                f"if the load fails, put the previous config back with {back}")
        return ApplyResult(self.model, ApplyOutcome.UNFINISHED, f"{error}\n{line}", self.diff,
                           self.current.sha256, self.new_sha, explanation=error.explanation, serving=serving,
                           serving_version=version)

    def restore(self, error: GeAdminError, *, reload: bool = False,
                fix: str = "fix the new config and apply again") -> ApplyResult:
        """Triton did not take the new config (or, `reload`, took it and then failed a request):
        put the previous file back, byte for byte, and with `reload` load it again."""
        explanation: Explanation | None = getattr(error, "explanation", None)
        problem, reloaded = self.put_back(reload)
        serving, version, _ = explain.check_serving(self.client, self.before)
        lines = [str(error)]
        if isinstance(error, TritonTimeoutError) and not (explanation and explanation.hung):
            lines.append("  the load had not finished when geadmin gave up: Triton may still finish "
                         "loading the new config; check `geadmin models list` in a moment")
        if not problem:
            again = (f" and reloaded: {'it serves again' if serving is Serving.PREVIOUS else serving.value}"
                     if reloaded else "")
            lines.append(f"  the previous {CONFIG_FILE} is restored, byte for byte{again}: {fix}")
            outcome = ApplyOutcome.ROLLED_BACK
        else:
            lines.append(f"  and the previous {CONFIG_FILE} could NOT be restored ({problem}): restore "
                         f"it with {self.way_back()}")
            outcome = ApplyOutcome.RESTORE_FAILED
        return ApplyResult(self.model, outcome, "\n".join(lines), self.diff, self.current.sha256,
                           self.new_sha, explanation=explanation, serving=serving, serving_version=version)

    def cut_short(self, cause: str, *, loading: bool) -> ApplyResult:
        """The apply was cut short (`cause`: Ctrl-C, SIGTERM) once its started row was written: the
        previous file put back (when the new one is on disk) and, when Triton was asked to load the
        new one (`loading`), loaded again: Triton read the new file when its load began, and would
        serve it once that load ends. One line says so, or names the way back."""
        problem, reloaded = self.put_back(loading)
        serving, version, _ = explain.check_serving(self.client, self.before)
        if problem:
            return ApplyResult(self.model, ApplyOutcome.RESTORE_FAILED,
                               f"{cause}, and the previous {CONFIG_FILE} of {self.model!r} could NOT be "
                               f"restored ({problem}): restore it with {self.way_back()}", self.diff,
                               self.current.sha256, self.new_sha, serving=serving, serving_version=version)
        again = (f", and reloaded: {'it serves again' if serving is Serving.PREVIOUS else serving.value}"
                 if reloaded else "")
        return ApplyResult(self.model, ApplyOutcome.ROLLED_BACK,
                           f"{cause}: the previous {CONFIG_FILE} is restored, byte for byte{again}; "
                           "nothing changed: apply again when you are ready", self.diff, self.current.sha256,
                           self.new_sha, serving=serving, serving_version=version)

    def put_back(self, reload: bool) -> tuple[str, bool]:
        """The previous file back on disk (nothing written when it is there already), and loaded
        again with `reload`, or when the model served before and serves no more: ("" or why it
        could not be, whether it was loaded again)."""
        current, before = self.current, self.before
        problem = ""
        try:
            if not holds(self.repository, self.model, current.data):
                store.write_config(self.repository, self.model, current.data, expected_sha256=self.new_sha,
                                   who=self.who, backup=False, home=self.home)
            if store.read_config(self.repository, self.model).data != current.data:
                problem = "the file read back after the restore differs from the previous one"
        except ConfigConflictError as exc:  # never overwrite it
            problem = str(exc)
        except (RepositoryError, WorkspaceDatabaseError) as exc:
            if not holds(self.repository, self.model, current.data):
                problem = str(exc)
            else:  # in place (read back), its durability unconfirmed
                self.unconfirmed += (f"the previous {CONFIG_FILE} is back on disk (read back), but: {exc}",)
        # Check, don't assume: Triton unloads an ensemble whose new config it refuses
        reload = reload or (not problem and before.was_ready is True
                            and explain.check_serving(self.client, before)[0] is Serving.NOTHING)
        if reload and not problem:
            try:
                load_explained(self.client, self.model, log=self.log, repository=self.repository,
                               progress=self.progress, auth=self.auth)
            except GeAdminError as exc:
                problem = f"the previous config is back on disk but did not load again: {exc}"
        return problem, reload

    def way_back(self) -> str:
        """How an operator puts the previous config back when geadmin could not."""
        if holds(self.repository, self.model, self.current.data):  # on disk: Triton did not load it again
            return f"`geadmin models load {self.model}` (the previous file is on disk)"
        backup = revisions.revision_with_hash(self.repository, self.model, self.current.sha256, self.home)
        return (f"`geadmin config rollback {self.model} {backup.number}`" if backup
                else "the previous file from your own backup")
