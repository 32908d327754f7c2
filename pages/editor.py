"""Config editor: edit a model's config.pbtxt with live findings, knobs and diffs; apply it
safely (validated, reloaded, rolled back if Triton rejects it) and roll back to any revision.

The text area holds the one edited text; the knobs are a view of it and write back into it
(geadmin.repository.knobs); apply and rollback are geadmin.ops.apply. Before either, the ensembles
that run the model are named (geadmin.diagnose.impact); a change that takes one down, and every
rollback, asks for confirmation; afterwards what else changed state is listed."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd
import streamlit as st

from geadmin.access.roles import GuardedAction
from geadmin.diagnose import impact
from geadmin.diagnose.failure_text import FailureText, from_message
from geadmin.errors import (
    ConfigConflictError,
    ConfigInvalidError,
    ConfigParseError,
    GeAdminError,
    RepositoryError,
    TritonError,
)
from geadmin.ops import actions
from geadmin.ops.apply import ApplyOutcome, ApplyResult, apply_config, rollback
from geadmin.repository import revisions, store
from geadmin.repository.knobs import Knobs, compare_with_live, parse_sizes, read_knobs, with_knobs
from geadmin.repository.modelconfig import parse_pbtxt, to_file_text
from geadmin.repository.positions import lost_comments
from geadmin.repository.validate import Finding, Severity, validate_text
from geadmin.stack.target import Target
from pages.ui import access, keys
from pages.ui.context import client_for, log_for, selected_target
from pages.ui.errors import failure_of, show_failure
from pages.ui.impact_view import server_backends, show_impact, show_side_effects
from pages.ui.links import preselect

MONOSPACE = ('<style>textarea[aria-label="config.pbtxt"] {font-family: "Source Code Pro", ui-monospace, '
             "monospace; font-size: 0.85rem; white-space: pre; overflow-wrap: normal;}</style>")
ICONS = {Severity.ERROR: ":material/error:", Severity.WARNING: ":material/warning:",
         Severity.INFO: ":material/info:"}


@dataclass(frozen=True)
class Opened:
    """The file as the editor read it: the base of the edit and of the conflict check."""

    server: str
    model: str
    sha256: str
    text: str


def render() -> None:
    st.title("Config editor")
    target = selected_target()
    if target.repository is None:
        st.info("No model repository is known for this server, so there is nothing to edit: start the "
                "stack with `geadmin up`, or set GEADMIN_REPOSITORY to the directory Triton serves.")
        return
    try:
        names = store.model_names(target.repository)
    except RepositoryError as exc:
        st.error(str(exc), icon=":material/error:")
        return
    if not names:
        st.info(f"{target.repository} holds no model with a config.pbtxt yet.")
        return
    preselect(keys.EDITOR_MODEL, names)  # a deep link's model
    model = st.selectbox("Model", names, key=keys.EDITOR_MODEL)
    opened = open_model(target, model)
    if opened is None:
        return
    conflict_banner(target, opened)
    text_col, side_col = st.columns([3, 2])
    with text_col:
        st.html(MONOSPACE)
        text = st.text_area("config.pbtxt", key=keys.EDITOR_TEXT, height=460,
                            help="edit the text, or use the knobs on the right; findings update as you go")
    with side_col:
        findings = show_findings(text, target, model)
        knobs_form(text)
    comparisons(target, opened, text)
    apply_section(target, opened, text, findings)
    history_section(target, opened)


def open_model(target: Target, model: str, *, reread: bool = False) -> Opened | None:
    """The opened file; read again (and the editor text reset) when the model or server changes."""
    opened: Opened | None = st.session_state.get(keys.EDITOR_OPENED)
    if not reread and opened is not None and (opened.server, opened.model) == (target.spec.name, model):
        return opened
    assert target.repository is not None
    try:
        current = store.read_config(target.repository, model)
    except RepositoryError as exc:
        st.error(str(exc), icon=":material/error:")
        return None
    opened = Opened(target.spec.name, model, current.sha256, current.text)
    st.session_state[keys.EDITOR_OPENED] = opened
    st.session_state[keys.EDITOR_TEXT] = opened.text
    return opened


def conflict_banner(target: Target, opened: Opened) -> None:
    assert target.repository is not None
    try:
        current = store.read_config(target.repository, opened.model)
    except RepositoryError as exc:
        st.error(str(exc), icon=":material/error:")
        return
    if current.sha256 == opened.sha256:
        return
    st.warning(f"`{opened.model}/config.pbtxt` changed on disk since you opened it (someone else applied a "
               "change, or the file was edited). Applying now is refused; reopen it to start from the "
               "new file (your edits are discarded), or copy your edits first.",
               icon=":material/sync_problem:")
    with st.expander("What changed on disk"):
        diff = revisions.text_diff(opened.text, current.text, f"{opened.model}/config.pbtxt",
                               "when you opened it", "on disk now")
        st.code(diff or "(no textual change)", language="diff")
    st.button("Reopen from disk", key=keys.EDITOR_REOPEN, on_click=_reopen)


def _reopen() -> None:
    st.session_state.pop(keys.EDITOR_OPENED, None)  # the next run reads the file again


def show_findings(text: str, target: Target, model: str) -> list[Finding]:
    assert target.repository is not None
    findings = validate_text(text, target.repository / model, backends=server_backends(target),
                             previous=revisions.last_good_config(target.repository, model))
    counts = {s: sum(f.severity is s for f in findings) for s in Severity}
    errors, warnings = counts[Severity.ERROR], counts[Severity.WARNING]
    st.markdown(f"**Findings** — {errors} error{'s' * (errors != 1)}, "
                f"{warnings} warning{'s' * (warnings != 1)}")
    if not findings:
        st.caption(":material/check_circle: no findings: Triton's and npu_ge's rules pass")
    for finding in findings:
        where = f"line {finding.line} · " if finding.line else ""
        path = f" `{finding.path}`" if finding.path else ""
        st.markdown(f"{ICONS[finding.severity]} {where}`{finding.rule}`{path}: {finding.message}  \n"
                    f"&nbsp;&nbsp;**fix:** {finding.fix}")
    return findings


def knobs_form(text: str) -> None:
    st.markdown("**Knobs**")
    try:
        knobs = read_knobs(parse_pbtxt(text))
    except ConfigParseError:
        st.caption("Fix the parse error to use the knobs.")
        return
    if error := st.session_state.pop(keys.EDITOR_KNOB_ERROR, None):
        st.error(error, icon=":material/error:")
    prefix = f"{keys.EDITOR_KNOB_PREFIX}{revisions.sha256_of(text.encode())[:12]}."  # new widgets per text
    with st.form(keys.EDITOR_KNOB_FORM, border=True):
        st.number_input("max_batch_size", min_value=0, value=knobs.max_batch_size, key=prefix + "mbs")
        st.checkbox("dynamic batching", value=knobs.dynamic_batching, key=prefix + "batching")
        st.number_input("max queue delay (µs)", min_value=0, value=knobs.max_queue_delay_us,
                        key=prefix + "delay")
        st.text_input("preferred batch sizes", value=", ".join(map(str, knobs.preferred_batch_sizes)),
                      key=prefix + "sizes", help="e.g. 4, 8")
        st.number_input("instance count", min_value=1, value=knobs.instance_count or 1, key=prefix + "count",
                        disabled=knobs.instance_count is None,
                        help="several instance groups: set their counts in the text")
        if knobs.device_ids is not None:
            st.text_input("device_ids (npu_ge)", value=knobs.device_ids, key=prefix + "devices",
                          help="NPUs for the instances, e.g. 0,1; instance i runs on device_ids[i % n]")
        st.text_input("versions served", value=knobs.versions or "", key=prefix + "versions",
                      help="version_policy: all, latest N, or versions such as 1, 2; empty: the latest")
        st.form_submit_button("Write knobs into the text", on_click=_write_knobs, args=(prefix, knobs))


def _write_knobs(prefix: str, shown: Knobs) -> None:
    """Form callback (runs before the rerun, so it may set the text area's value)."""
    state = st.session_state
    try:
        knobs = Knobs(int(state[prefix + "mbs"]), bool(state[prefix + "batching"]),
                      int(state[prefix + "delay"]),
                      parse_sizes(state[prefix + "sizes"]),
                      int(state[prefix + "count"]) if shown.instance_count is not None else None,
                      state.get(prefix + "devices") if shown.device_ids is not None else None,
                      state.get(prefix + "versions", shown.versions))
        result = with_knobs(state[keys.EDITOR_TEXT], knobs)
    except GeAdminError as exc:
        state[keys.EDITOR_KNOB_ERROR] = f"The knobs were not written: {exc}"
        return
    state[keys.EDITOR_TEXT] = result.text


def comparisons(target: Target, opened: Opened, text: str) -> None:
    edited, live_tab, highlighted = st.tabs(["Edited vs on disk", "On disk / live in Triton / edited",
                                             "Highlighted"])
    with edited:
        diff = revisions.text_diff(opened.text, text, f"{opened.model}/config.pbtxt", "on disk", "edited")
        st.code(diff or "No changes yet.", language="diff" if diff else "text")
    with live_tab:
        live_comparison(target, opened, text)
    with highlighted:
        st.code(text, language="protobuf", line_numbers=True)


def live_comparison(target: Target, opened: Opened, text: str) -> None:
    client = client_for(target)
    try:
        live = client.model_config(opened.model)
    except TritonError as exc:
        st.info(f"No live config to compare with: {exc}")
        return
    for label, source in (("on disk", opened.text), ("edited", text)):
        try:
            comparison = compare_with_live(source, live)
        except ConfigParseError as exc:
            st.caption(f"The {label} text does not parse: {exc}")
            continue
        if comparison.same:
            st.markdown(f":material/check_circle: every field set **{label}** is live in Triton")
        else:
            st.markdown(f":material/difference: fields set **{label}** that Triton serves differently: "
                        + ", ".join(f"`{p}`" for p in comparison.differing))
    with st.expander("Triton's live config (normalized, defaults filled in)"):
        st.code(to_file_text(live), language="protobuf")


def apply_section(target: Target, opened: Opened, text: str, findings: list[Finding]) -> None:
    st.subheader("Apply")
    errors = [f for f in findings if f.severity is Severity.ERROR]
    dropped = lost_comments(opened.text, text)
    if dropped:
        st.warning("This change drops comments from the file: " + "; ".join(f"`{c}`" for c in dropped),
                   icon=":material/comments_disabled:")
    load_col, smoke_col = st.columns(2)
    load = load_col.checkbox("Load the model if it is not loaded", key=keys.EDITOR_LOAD_UNLOADED,
                             help="otherwise a model that is not loaded only gets the file written")
    smoke = smoke_col.checkbox("Send a test request after the reload", key=keys.EDITOR_SMOKE, value=True,
                               help="one request of zeros; if it fails, the previous config is put back "
                                    "and reloaded")
    permitted, why_not = access.allowed(GuardedAction.APPLY)
    reason = (why_not if not permitted else "no changes to apply" if text == opened.text else
              f"fix the {len(errors)} error(s) above first" if errors else "")
    found = predicted(target, opened.model, "apply", text) if text != opened.text else None
    if found is not None:
        show_impact(found)
    asked = ("apply", target.spec.name, opened.model, revisions.sha256_of(text.encode()))
    if st.button("Apply", type="primary", key=keys.EDITOR_APPLY, disabled=bool(reason), help=reason or
                 "write atomically, reload in Triton; restored automatically if Triton rejects it"):
        if found is not None and found.takes_down:
            _ask(asked)  # asked below
        else:
            apply_now(target, opened, text, load, smoke)
    if st.session_state.get(keys.EDITOR_CONFIRM) == asked and not reason:
        st.warning(f"Apply the new config of {opened.model} although it takes down "
                   f"{', '.join(found.taken_down if found else [])}?", icon=":material/help:")
        if confirmed("apply"):
            apply_now(target, opened, text, load, smoke)
    show_notice("apply")


def apply_now(target: Target, opened: Opened, text: str, load: bool, smoke: bool) -> None:
    repository = target.repository
    assert repository is not None
    client = client_for(target)
    with st.spinner(f"Applying to {opened.model}: writing, reloading, checking what serves…"):
        run_change("apply", lambda: apply_config(
            client, repository, opened.model, text, expected_sha256=opened.sha256,
            base_text=opened.text, auth=access.auth_for(GuardedAction.APPLY, model=opened.model,
                                                          server=target.spec.url),
            log=log_for(target), load_unloaded=load,
            smoke=smoke, backends=server_backends(target)))


def predicted(target: Target, model: str, action: str, text: str) -> impact.Impact | None:
    """What applying `text` does to the ensembles that run `model` (None: it does not parse)."""
    try:
        new = parse_pbtxt(text)
    except ConfigParseError:
        return None
    return impact.predict(client_for(target), action, [model], repository=target.repository,
                          new_configs={model: new})


def confirmed(kind: str) -> bool:
    """Confirm / Cancel under a question; True when confirmed (the question is then dropped)."""
    yes, no = st.columns(2)
    no.button("Cancel", key=f"{keys.EDITOR_CONFIRM}.cancel", on_click=_ask, args=(None,))
    if yes.button(f"Confirm {kind}", type="primary", key=f"{keys.EDITOR_CONFIRM}.{kind}"):
        del st.session_state[keys.EDITOR_CONFIRM]
        return True
    return False


def _ask(question: tuple[object, ...] | None) -> None:
    """Button callback (runs before the rerun): ask `question`, or drop the open one."""
    if question is None:
        st.session_state.pop(keys.EDITOR_CONFIRM, None)
    else:
        st.session_state[keys.EDITOR_CONFIRM] = question


@dataclass(frozen=True)
class Notice:
    """What the last apply or rollback did, shown once under the button that started it."""

    origin: str  # "apply" or "rollback"
    ok: bool
    message: str
    details: tuple[str, ...] = ()
    diff: str = ""
    side_effects: tuple[impact.StateChange, ...] = ()
    failure: FailureText | None = None  # a failed apply or rollback, split for show_failure


def run_change(origin: str, change: Callable[[], ApplyResult]) -> None:
    """Run an apply or rollback, keep its notice for the next run, reopen the file it left."""
    try:
        result = change()
    except ConfigInvalidError as exc:
        notice = Notice(origin, False, str(exc), tuple(str(f) for f in exc.findings))
    except ConfigConflictError as exc:
        notice = Notice(origin, False, str(exc), diff=exc.diff())
    except GeAdminError as exc:
        notice = Notice(origin, False, str(exc), failure=failure_of(exc, actions.next_step(exc)))
    else:
        notice = Notice(origin, result.ok, result.message, result.warnings, side_effects=result.side_effects)
        if result.outcome in (ApplyOutcome.APPLIED, ApplyOutcome.WRITTEN):
            st.session_state.pop(keys.EDITOR_OPENED, None)  # the file changed: start from it
        # rejected: the edit stays in the text area, to fix and apply again
    st.session_state[keys.EDITOR_NOTICE] = notice
    st.rerun()


def show_notice(origin: str) -> None:
    notice: Notice | None = st.session_state.get(keys.EDITOR_NOTICE)
    if notice is None or notice.origin != origin:
        return
    del st.session_state[keys.EDITOR_NOTICE]
    show_side_effects(notice.side_effects)
    if notice.ok:
        st.success(notice.message, icon=":material/check_circle:")
    else:
        show_failure(notice.failure or from_message(notice.message))
    for line in notice.details:
        st.caption(line)
    if notice.diff:
        st.code(notice.diff, language="diff")


def history_section(target: Target, opened: Opened) -> None:
    assert target.repository is not None
    st.subheader("History")
    try:
        kept = revisions.history(target.repository, opened.model)
    except GeAdminError as exc:
        st.error(f"Cannot read the config history: {exc}", icon=":material/error:")
        return
    if not kept:
        st.caption("No revision kept yet: geadmin keeps one each time it applies a change.")
        return
    st.dataframe(pd.DataFrame([{"revision": r.number, "at": r.at.strftime("%Y-%m-%d %H:%M:%S"), "who": r.who,
                                "note": r.note, "current": r.sha256 == opened.sha256} for r in kept]),
                 hide_index=True, width="stretch")
    numbers = [r.number for r in kept]
    by_number = {r.number: r for r in kept}
    number = st.selectbox("Revision", numbers, key=keys.EDITOR_REVISION, format_func=lambda n: (
        f"revision {n} · {by_number[n].at:%Y-%m-%d %H:%M:%S} · {by_number[n].who} · {by_number[n].note}"))
    chosen = by_number[number]
    st.code(revisions.text_diff(opened.text, chosen.text, f"{opened.model}/config.pbtxt", "on disk",
                            f"revision {number}") or "Same as the file on disk.", language="diff")
    permitted, why_not = access.allowed(GuardedAction.ROLLBACK)
    asked = ("rollback", target.spec.name, opened.model, number)
    st.button(f"Roll back to revision {number}", key=keys.EDITOR_ROLLBACK,
              disabled=chosen.sha256 == opened.sha256 or not permitted, on_click=_ask, args=(asked,),
              help=why_not or "an audited apply of that revision; unapplied edits in the editor are "
              "discarded; asks first")
    if st.session_state.get(keys.EDITOR_CONFIRM) == asked and permitted and chosen.sha256 != opened.sha256:
        st.warning(f"Roll {opened.model} back to revision {number}? Its config is written and reloaded in "
                   "Triton like any change (restored if Triton rejects it); unapplied edits in the editor "
                   "are discarded.", icon=":material/help:")
        found = predicted(target, opened.model, "rollback", chosen.text)
        if found is not None:
            show_impact(found)
        if confirmed("rollback"):
            rollback_now(target, opened, number)
    show_notice("rollback")


def rollback_now(target: Target, opened: Opened, number: int) -> None:
    repository = target.repository
    assert repository is not None
    client = client_for(target)
    with st.spinner(f"Rolling {opened.model} back to revision {number}…"):
        run_change("rollback", lambda: rollback(
            client, repository, opened.model, number, expected_sha256=opened.sha256,
            auth=access.auth_for(GuardedAction.ROLLBACK, model=opened.model, server=target.spec.url),
            log=log_for(target)))
