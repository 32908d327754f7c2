"""The checks of a create before anything is written, and the plan of files they yield.

`geadmin.ops.models.create.create_model` runs them first and audits each refusal as "create" /
refused: uploaded code (`model.py` or any `.py`, `.pyc`, `.so`: Triton runs it as its own user)
from an actor without the admin role's `upload_code` permission (`check_code_upload`), a name
that is not a plain model name, anything already at that name (a directory, a file, a symlink),
a file path that would leave the model directory (`..`, absolute, a symlink on the way:
`paths.safe_model_path`), `config.pbtxt` among the uploads (the template writes it), a file
over the upload limit, knobs the template cannot use (`plan_model`), and — when loading — a
Triton that does not answer or already knows the name (`check_triton`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from geadmin.audit import Actor, Origin
from geadmin.errors import AccessDeniedError, CreateRefusedError, TemplateError
from geadmin.repository import paths, templates
from geadmin.repository.modelconfig import CONFIG_FILE
from geadmin.repository.paths import DEFAULT_UPLOAD_LIMIT_BYTES
from geadmin.repository.templates import Params
from geadmin.triton.client import TritonClient


@dataclass(frozen=True)
class Plan:
    """Everything checked, nothing written yet."""

    root: Path
    name: str
    template: str
    destination: Path
    files: dict[str, bytes]  # relative path -> content, config.pbtxt first


CODE_SUFFIXES = (".py", ".pyc", ".so")


def code_files(paths: Iterable[str]) -> list[str]:
    """The uploads Triton or a backend would run as code: Python (the python backend's
    `model.py` and whatever it imports) and shared libraries (a backend or custom ops)."""
    return sorted(p for p in paths if PurePosixPath(p).name.lower().endswith(CODE_SUFFIXES)
                  or ".so." in PurePosixPath(p).name.lower())


def check_code_upload(files: Mapping[str, bytes], actor: Actor, may_upload_code: bool | None) -> None:
    """AccessDeniedError when `files` hold code and the actor may not upload code."""
    code = code_files(files)
    allowed = actor.origin is not Origin.DASHBOARD if may_upload_code is None else may_upload_code
    if code and not allowed:
        raise AccessDeniedError(f"not allowed: {', '.join(code)} would run as Triton's user, so uploading "
                                f"code needs the admin role; {actor.name} may create models from "
                                "model files (ONNX, .om, ...) and the template's own model.py: ask an admin")


def plan_model(repository: Path, name: str, template: str, params: Params, files: Mapping[str, bytes],
               limit_bytes: int = DEFAULT_UPLOAD_LIMIT_BYTES) -> Plan:
    """Every check that needs no writing: raises on the first problem."""
    templates.check_model_name(name)
    destination = paths.safe_model_path(repository, name)  # the repository exists; no symlink there
    if os.path.lexists(destination):
        kind = "a directory" if destination.is_dir() else "a file"
        raise CreateRefusedError(f"refused: {destination} already exists ({kind}): pick another name, or "
                                 f"change that model's config instead (`geadmin config apply {name} FILE`)")
    config = templates.render_config(template, name, params).encode("utf-8")
    planned: dict[str, bytes] = {CONFIG_FILE: config, **templates.provided_files(template)}
    uploaded: set[str] = set()
    for given, data in files.items():
        relative = _relative(repository, name, given)
        if relative in uploaded:
            raise CreateRefusedError(f"refused: two files name {relative!r}; upload each file once")
        paths.check_upload_size(given, len(data), limit_bytes)
        uploaded.add(relative)
        planned[relative] = data
    _refuse_file_dir_clashes(planned)
    problem = "" if "model.py" in {PurePosixPath(p).name for p in uploaded} else \
        templates.identity_problem(template, params)
    if problem:
        raise TemplateError(f"refused: {problem}")
    return Plan(destination.parent, name, template, destination, planned)


def _relative(repository: Path, name: str, given: str) -> str:
    """`given` as a normalized path inside the model directory, or a refusal."""
    paths.safe_model_path(repository, name, given)  # no '..', not absolute, no backslash, no symlink
    relative = PurePosixPath(given)
    if not relative.parts:
        raise CreateRefusedError(f"refused path {given!r}: it names no file; give one such as 1/model.om")
    if str(relative) == CONFIG_FILE:
        raise CreateRefusedError(f"refused {given!r}: the template writes {CONFIG_FILE}; change it after "
                                 f"creating the model (`geadmin config apply {name} FILE`)")
    return str(relative)


def _refuse_file_dir_clashes(planned: Mapping[str, bytes]) -> None:
    """A path cannot be a file and a directory at once (`1` beside `1/model.om`)."""
    directories = {str(parent) for path in planned for parent in PurePosixPath(path).parents} | \
        {templates.VERSION}
    clash = sorted(directories & set(planned))
    if clash:
        raise CreateRefusedError(f"refused {clash[0]!r}: it is a directory of the new model (it holds other "
                                 "files, or it is the version directory); give a file path inside it, "
                                 "e.g. 1/model.om")


def check_triton(client: TritonClient | None, name: str) -> None:
    """A refusal unless Triton answers and knows no model `name` (the new model is to be loaded)."""
    if client is None:
        raise CreateRefusedError("refused: loading the new model needs a Triton server to talk to")
    known = [e for e in client.repository_index() if e.name == name]  # raises when Triton does not answer
    if known:
        raise CreateRefusedError(f"refused: Triton at {client.url} already has a model {name!r} "
                                 f"({known[0].state.value}) although its directory does not exist: pick "
                                 "another name, or unload that model first")
