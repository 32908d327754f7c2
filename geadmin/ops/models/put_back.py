"""Put back what serves: the fix for drift (`geadmin.diagnose.drift`) that writes the config
Triton serves to disk — atomic, the drifted file kept as a revision, audited — then checks
that nothing drifts any more. The file to write is `geadmin.diagnose.drift.served_file`.

It holds the model's apply lock (`geadmin.repository.locks.edit_lock`, purpose "apply") without
waiting, from the read to the check: during an apply's load the served config is the previous
one, and putting it back would overwrite the file Triton is loading. Refused while an apply runs.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from geadmin import audit
from geadmin.access.guard import Authorization, require
from geadmin.access.roles import GuardedAction
from geadmin.db import WorkspaceDatabaseError
from geadmin.diagnose.drift import drift_of, served_file
from geadmin.errors import ConfigLockedError, GeAdminError, RepositoryError
from geadmin.repository import locks, revisions, store
from geadmin.triton.client import TritonClient

PUT_BACK_ACTION = "put-back-served"  # the audit action of `put_back_served`


def put_back_served(client: TritonClient, repository: Path, name: str, *, auth: Authorization | None = None,
                    home: Path | None = None) -> str:
    """Write the served config to disk (atomic, the drifted file kept as a revision, audited),
    then check that nothing drifts any more. Returns what was done; raises GeAdminError.
    `auth` must cover `rollback` (NotAuthorizedError before anything is read)."""
    actor = require(auth, GuardedAction.ROLLBACK)
    with contextlib.ExitStack() as held:
        try:
            held.enter_context(locks.edit_lock(repository, name, "apply", home=home, wait_s=0))
        except ConfigLockedError as exc:
            refusal = ConfigLockedError(f"an apply of {name!r} is under way: wait for it to finish, then "
                                        f"check the drift again (nothing was written; {exc})")
            with contextlib.suppress(WorkspaceDatabaseError):  # the refusal is raised all the same
                audit.record(PUT_BACK_ACTION, name, audit.Result.REFUSED, actor=actor, server=client.url,
                             message=str(refusal), home=home)
            raise refusal from exc
        return _put_back(client, repository, name, actor, home)


def _put_back(client: TritonClient, repository: Path, name: str, actor: audit.Actor,
              home: Path | None) -> str:
    """`put_back_served` under the model's apply lock."""
    served = client.model_config(name)
    path = store.config_path(repository, name)
    try:
        current = store.read_config(repository, name)
        on_disk, expected = current.data, current.sha256
    except RepositoryError:
        if not path.parent.is_dir():
            raise
        on_disk, expected = b"", store.ABSENT  # the file was deleted while the model serves
    data = served_file(repository, name, served, home)
    diff = revisions.config_diff(on_disk, data, name, "on disk", "served")
    try:
        store.write_config(repository, name, data, expected_sha256=expected, who=actor.name,
                           note="drifted from what Triton served", home=home)
    except GeAdminError as exc:
        audit.record(PUT_BACK_ACTION, name, audit.Result.FAILED, actor=actor, server=client.url,
                     message=str(exc), home=home)
        raise
    left = drift_of(repository, name, client.model_config(name))
    message = (f"put the config Triton serves for {name!r} back in {path}"
               + (f"; it still differs: {left.headline}" if left else "; disk and Triton agree again"))
    audit.record(PUT_BACK_ACTION, name, audit.Result.OK if left is None else audit.Result.FAILED,
                 actor=actor, server=client.url, message=message, diff=diff, home=home)
    return message
