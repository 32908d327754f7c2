"""The config fields that decide which code Triton runs for a model.

Changing one turns files in the model directory into code run as Triton's user: `backend`,
`platform` and `runtime` pick the backend library (Triton looks for `libtriton_<name>.so` in
the model's own directory first), `default_model_filename` picks the python backend's script,
`model_operations` loads custom-op libraries, and the python backend's `EXECUTION_ENV_PATH`
parameter unpacks an environment whose activate script it runs. So a change to any of them
needs the same right as uploading code (geadmin.access.roles: upload_code)."""

from __future__ import annotations

from tritonclient.grpc import model_config_pb2

from geadmin.errors import AccessDeniedError, GeAdminError
from geadmin.repository.modelconfig import parse_pbtxt

CODE_PARAMETERS = ("EXECUTION_ENV_PATH",)


def code_field_changes(old_data: bytes, new: model_config_pb2.ModelConfig) -> list[str]:
    """The code-deciding fields whose value differs between the file `old_data` (unreadable:
    every field counts as changed) and `new`."""
    try:
        before = parse_pbtxt(old_data.decode("utf-8"), "the current config")
    except (UnicodeDecodeError, GeAdminError):
        before = model_config_pb2.ModelConfig()
    changed = [name for name in ("backend", "platform", "runtime", "default_model_filename")
               if getattr(before, name) != getattr(new, name)]
    if before.model_operations != new.model_operations:
        changed.append("model_operations")
    changed += [f"parameters[{key}]" for key in CODE_PARAMETERS
                if before.parameters.get(key) != new.parameters.get(key)]
    return changed


def refuse_code_change(model: str, old_data: bytes, new: model_config_pb2.ModelConfig, *, who: str,
                       may_upload_code: bool) -> None:
    """AccessDeniedError when `new` changes a code-deciding field and the actor may not upload code."""
    changed = code_field_changes(old_data, new)
    if changed and not may_upload_code:
        verb = "decides" if len(changed) == 1 else "decide"
        raise AccessDeniedError(
            f"not allowed: the new config of {model!r} changes {', '.join(changed)}, which {verb} what code "
            f"Triton runs from the model directory; that needs the admin role ({who} may change batching, "
            "instances and the other serving fields): ask an admin")
