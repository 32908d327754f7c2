"""Test hooks: variables only tests set, never production. They are no settings (not in
geadmin.settings' table, not in the settings reference, not in the bundle); docs/development.md
lists them.

`GEADMIN_FAULT_POINT`: the name of a step of an apply, a create or a fleet rollout
(`apply.started`, `apply.written`, `apply.loaded`, `create.started`, `create.staged`,
`create.renamed`, `rollout.started`, `rollout.changing.N`, `rollout.changed.N`,
`rollout.ending`, `version.between_steps`: a version rollout's first step done, its retire step
not started) at which geadmin kills itself with SIGKILL, so the fault tests
(tests/integration/test_cut_short.py, test_fleet_journal.py) can check that nothing is lost
when a change is cut short.
"""

from __future__ import annotations

import os
import signal

FAULT_POINT = "GEADMIN_FAULT_POINT"
HOOKS = (FAULT_POINT,)  # every variable this module reads (tests/unit/test_test_hooks.py)


def fault_point(step: str) -> None:
    """When GEADMIN_FAULT_POINT names `step`, this process dies here by SIGKILL (no cleanup, no
    finally, like a power cut or an OOM kill). A no-op when the variable is unset."""
    if os.environ.get(FAULT_POINT) == step:
        os.kill(os.getpid(), signal.SIGKILL)
