"""What an apply (or a rollback) of a config returns: its outcome, the audit result each
outcome is recorded as, and the result with its message, diff and what serves
(`geadmin.ops.models.apply` runs the change; the CLI, the editor, fleet rollouts, tuning and
NPU remedies read these)."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from geadmin.audit import Result
from geadmin.diagnose.explain import explanation_dict
from geadmin.diagnose.state_changes import StateChange
from geadmin.domain import Explanation, Serving


class ApplyOutcome(str, enum.Enum):
    APPLIED = "applied"  # on disk, and Triton loaded it
    WRITTEN = "written"  # on disk; the model is not loaded, so Triton has not checked it
    UNCHANGED = "unchanged"  # the same bytes as on disk: nothing done
    ROLLED_BACK = "rolled_back"  # Triton rejected it; the previous file is back, byte for byte
    UNFINISHED = "unfinished"  # on disk; Triton had not finished loading it when geadmin stopped waiting
    RESTORE_FAILED = "restore_failed"  # rejected, and the previous file could NOT be put back


# A write that loaded nothing has a result of its own: the verdict (geadmin.diagnose.unloads) must
# never read it as a change of what serves (it would turn an operator's unload into a drop).
AUDIT_RESULTS = {ApplyOutcome.APPLIED: Result.OK, ApplyOutcome.WRITTEN: Result.WRITTEN,
                 ApplyOutcome.ROLLED_BACK: Result.ROLLED_BACK, ApplyOutcome.RESTORE_FAILED: Result.FAILED,
                 ApplyOutcome.UNFINISHED: Result.UNFINISHED}


@dataclass(frozen=True)
class ApplyResult:
    model: str
    outcome: ApplyOutcome
    message: str  # cause first, then what serves and what to do
    diff: str  # unified diff, previous -> new
    previous_sha256: str
    new_sha256: str
    revision: int | None = None  # history number of the config now on disk
    explanation: Explanation | None = None  # why Triton rejected it
    serving: Serving = Serving.UNKNOWN  # what Triton said after the apply (or the restore)
    serving_version: str = ""
    warnings: tuple[str, ...] = field(default_factory=tuple)
    side_effects: tuple[StateChange, ...] = ()  # other models whose state changed with it

    @property
    def ok(self) -> bool:
        return self.outcome in (ApplyOutcome.APPLIED, ApplyOutcome.WRITTEN, ApplyOutcome.UNCHANGED)

    def record(self) -> dict[str, Any]:
        """For `--json`."""
        return {"model": self.model, "outcome": self.outcome.value, "ok": self.ok,
                "message": self.message, "diff": self.diff, "previous_sha256": self.previous_sha256,
                "new_sha256": self.new_sha256, "revision": self.revision,
                "serving": self.serving.name, "serving_version": self.serving_version,
                "warnings": list(self.warnings),
                "side_effects": [change.record() for change in self.side_effects],
                "explanation": explanation_dict(self.explanation) if self.explanation else None}
