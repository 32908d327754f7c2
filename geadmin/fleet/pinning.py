"""The config a version rollout's way back writes (geadmin.fleet.versions): the config before
step 1, unless its version_policy would serve another set of versions once the new version's
directory is in the repository (no version_policy: Triton's `latest { num_versions: 1 }`, so the
new one; `latest N`, `all`). Then that config with `specific { versions: [old...] }`, so that a
put back (a failed gate, `geadmin fleet restore`) serves what served before, not the new version.
A policy that already pins versions (`specific`) is put back as it was.
"""

from __future__ import annotations

from pathlib import Path

from geadmin.diagnose.rollout_plan import RetireStep, RolloutPlan
from geadmin.errors import RepositoryError
from geadmin.repository.knobs import set_policy
from geadmin.repository.modelconfig import parse_pbtxt
from geadmin.repository.rewrite import rewrite


def served_by_policy(text: str, directories: set[int]) -> set[int] | None:
    """The versions `text`'s version_policy serves out of the version `directories`; None for
    `specific` (it names them, whatever the directories)."""
    policy = parse_pbtxt(text).version_policy
    which = policy.WhichOneof("policy_choice")
    if which == "specific":
        return None
    if which == "all":
        return set(directories)
    count = max(policy.latest.num_versions, 1) if which == "latest" else 1
    return set(sorted(directories)[-count:])


def pinned_config(text: str, model_dir: Path, retire: RetireStep) -> str | None:
    """`text` pinned to `retire.old` when it would serve another set of versions of `model_dir`
    (the new version's directory is there), else None: put back as it is."""
    directories = {int(d.name) for d in _entries(model_dir) if d.is_dir() and d.name.isdigit()}
    serves = served_by_policy(text, directories | {retire.version})
    if not retire.old or serves is None or serves == set(retire.old):
        return None
    config = parse_pbtxt(text)
    set_policy(config, ", ".join(map(str, retire.old)))
    return rewrite(text, config).text


def _entries(model_dir: Path) -> list[Path]:
    try:
        return list(model_dir.iterdir())
    except OSError as exc:
        raise RepositoryError(f"cannot list the versions in {model_dir}: {exc.strerror or exc}") from exc


def pinned_note(plan: RolloutPlan) -> str:
    """What a put back of `plan` writes when it pins the old versions, said; "" when it does not."""
    retire = plan.retire
    pinned = [p for p in plan.previous if p.pinned_revision]
    if retire is None or not pinned:
        return ""
    versions = ", ".join(map(str, pinned[0].pinned))
    return (f"the config put back pins {retire.old_text} (version_policy `versions: [{versions}]`): "
            f"{plan.model}/{retire.version}/ is in the repository, and the config before the rollout, "
            "unpinned, would serve it")
