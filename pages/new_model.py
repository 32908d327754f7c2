"""New model: a model directory from a template, its files uploaded, validated, loaded."""

from __future__ import annotations

import streamlit as st

from geadmin.access.roles import GuardedAction
from geadmin.errors import CreateRefusedError, GeAdminError
from geadmin.ops.models import create, create_plan
from geadmin.ops.models.create import CreateResult
from geadmin.repository import paths, templates
from geadmin.repository.templates import Params
from geadmin.repository.validate import Severity
from pages.ui import access, keys
from pages.ui.context import log_for, selected_client, selected_target
from pages.ui.outside_text import defused

MIB = 1024 * 1024
PREVIEW_NAME = "my_model"  # shown in the preview until a name is typed


def upload_limit_bytes() -> int:
    """geadmin's upload limit, or Streamlit's own (server.maxUploadSize, MB) when smaller."""
    return min(paths.DEFAULT_UPLOAD_LIMIT_BYTES, int(st.get_option("server.maxUploadSize")) * MIB)


def _size(count: int) -> str:
    return f"{count / (1024 * MIB):.1f} GiB" if count >= 1024 * MIB else f"{count / MIB:.0f} MiB"


def render() -> None:
    st.title("New model")
    target = selected_target()
    show_result()
    if target.repository is None:
        st.error("geadmin does not know which model repository this server serves, so it cannot create a "
                 "model there.\n\n**Next step:** set GEADMIN_REPOSITORY (the embedded stack sets it itself).",
                 icon=":material/error:")
        return
    st.caption(f"Creates a directory in `{target.repository}`, validates it, then loads it. Nothing is "
               "written when the name, a file or the config is refused.")
    template_id = st.selectbox("Template", list(templates.TEMPLATES), key=keys.NEW_MODEL_TEMPLATE,
                               format_func=lambda t: templates.TEMPLATES[t].title)
    tpl = templates.template(template_id)
    st.caption(tpl.description)
    name = st.text_input("Model name", key=keys.NEW_MODEL_NAME, placeholder=PREVIEW_NAME,
                         help="letters, digits, '_', '-' and '.'; it names the directory").strip()
    params, problem = knobs(tpl)
    may_upload_code, code_why_not = access.allowed(GuardedAction.UPLOAD_CODE)
    files = uploads(tpl, may_upload_code, code_why_not)
    code = create_plan.code_files(files)
    if code and not may_upload_code:
        problem = (f"{', '.join(code)}: uploaded code runs as Triton's user, so only an admin may upload it "
                   f"({code_why_not}). Remove it; the python template writes its own identity model.py.")
    text = ""
    if params is not None:
        try:
            text = templates.render_config(template_id, name or PREVIEW_NAME, params)
        except GeAdminError as exc:
            problem = str(exc)
        if not problem and f"{tpl.version_dir}/model.py" not in files:
            problem = templates.identity_problem(template_id, params)
    if problem:
        st.warning(defused(problem), icon=":material/warning:")
    if text:
        with st.expander("config.pbtxt preview", expanded=True):
            st.code(text, language="protobuf")
    load = st.checkbox("Load after creating", value=True, key=keys.NEW_MODEL_LOAD,
                       help="through Triton's repository API; unchecked, only the directory is created")
    permitted, why_not = access.allowed(GuardedAction.CREATE)
    if st.button("Create", type="primary", key=keys.NEW_MODEL_CREATE, help=why_not or None,
                 disabled=not name or params is None or bool(problem) or not permitted):
        with st.spinner(f"Creating {name}" + (" and loading it…" if load else "…")):
            try:
                auth = access.auth_for(GuardedAction.CREATE, model=name, server=target.spec.url)
                outcome: CreateResult | GeAdminError = create.create_model(
                    selected_client(), target.repository, name, template_id, params, files,
                    auth=auth, may_upload_code=may_upload_code, load=load, limit_bytes=upload_limit_bytes(),
                    log=log_for(target))
            except GeAdminError as exc:
                outcome = exc
        st.session_state[keys.NEW_MODEL_RESULT] = outcome
        st.rerun()


def knobs(tpl: templates.Template) -> tuple[Params | None, str]:
    """The template's knobs as `Params`, or None and why they are not usable."""
    batch_col, devices_col = st.columns(2)
    mbs = batch_col.number_input("max_batch_size", min_value=0, max_value=templates.MAX_BATCH_SIZE, value=8,
                                 step=1, key=keys.NEW_MODEL_MAX_BATCH, help="0: no batching")
    devices = devices_col.text_input("device_ids", value="0", key=keys.NEW_MODEL_DEVICE_IDS,
                                     disabled=not tpl.uses_devices,
                                     help="npu_ge: NPUs for the instances, e.g. 0,1 (one instance each)")
    in_col, out_col = st.columns(2)
    # One text area per template, so switching templates shows that template's tensors.
    inputs = in_col.text_area("Inputs — NAME:DTYPE:DIMS, one per line",
                              value="\n".join(t.spec() for t in tpl.inputs),
                              key=f"{keys.NEW_MODEL_INPUTS_PREFIX}{tpl.id}",
                              help="dims without the batch dimension, e.g. x:FP32:3,224,224")
    outputs = out_col.text_area("Outputs — NAME:DTYPE:DIMS, one per line",
                                value="\n".join(t.spec() for t in tpl.outputs),
                                key=f"{keys.NEW_MODEL_OUTPUTS_PREFIX}{tpl.id}")
    try:
        return Params(max_batch_size=int(mbs), inputs=templates.parse_tensors(inputs),
                      outputs=templates.parse_tensors(outputs),
                      device_ids=templates.parse_device_ids(devices) if tpl.uses_devices else (0,)), ""
    except GeAdminError as exc:
        return None, str(exc)


def uploads(tpl: templates.Template, may_upload_code: bool = True, why_not: str = "") -> dict[str, bytes]:
    """The uploaded files by their path in the model directory. A model file that is code
    (the python template's model.py) can be uploaded by an admin only."""
    limit = upload_limit_bytes()
    st.caption(f"Uploads: up to {_size(limit)} per file. Copy larger model files into the repository "
               "directly (scp, a volume).")
    code_only = bool(create_plan.code_files([tpl.model_file])) and not may_upload_code
    main = st.file_uploader(f"Model file → {tpl.model_file}", key=f"{keys.NEW_MODEL_FILE_PREFIX}{tpl.id}",
                            disabled=code_only, help=f"code: {why_not}" if code_only else tpl.model_file_help)
    extra = st.file_uploader(f"Other files → {tpl.version_dir}/ (optional)", accept_multiple_files=True,
                             key=f"{keys.NEW_MODEL_EXTRA_PREFIX}{tpl.id}",
                             help="e.g. weights or a tokenizer the model reads next to its model file")
    files = {f"{tpl.version_dir}/{f.name}": f.getvalue() for f in extra or []}
    if main is not None:
        files[tpl.model_file] = main.getvalue()
    return files


def show_result() -> None:
    outcome = st.session_state.pop(keys.NEW_MODEL_RESULT, None)
    if isinstance(outcome, GeAdminError):
        cause, _, details = str(outcome).partition("\n")
        st.error(f"**Not created:** {cause}\n\n**Next step:** {create.next_step(outcome)}",
                 icon=":material/error:")
        if isinstance(outcome, CreateRefusedError) and outcome.findings:
            findings_table(outcome)
        elif details:
            st.code(details, language="text")
    elif isinstance(outcome, CreateResult):
        if outcome.ok:
            st.success(outcome.message, icon=":material/check_circle:")
        else:
            next_step = create.next_step(outcome.error) if outcome.error else "read Triton's log"
            st.error(f"**{defused(outcome.model)} was created, but Triton did not load it:** "
                     f"{defused(outcome.reason)}\n\n"
                     f"**Next step:** {next_step}; the directory stays, fix it and load it from the "
                     "Models page.", icon=":material/error:")
            with st.expander(f"Details for {outcome.model}"):
                st.code(outcome.message, language="text")
        for finding in outcome.findings:
            st.info(defused(f"{finding.severity.value} [{finding.rule}] {finding.message} — {finding.fix}"),
                    icon=":material/info:")
        for warning in outcome.warnings:
            st.warning(defused(warning), icon=":material/warning:")


def findings_table(error: CreateRefusedError) -> None:
    rows = [{"severity": f.severity.value, "rule": f.rule, "where": f.path, "cause": f.message, "fix": f.fix}
            for f in sorted(error.findings, key=lambda f: list(Severity).index(f.severity))]
    st.dataframe(rows, hide_index=True, width="stretch")
