"""Path safety in the model repository: the one gate for names that come from users
(uploads, new models) — no `..`, no absolute paths, no symlinks anywhere below the
repository, nothing outside it — and the upload size limit."""

from __future__ import annotations

from pathlib import Path, PurePosixPath

from geadmin.errors import RepositoryError
from geadmin.repository.bounded import size_text
from geadmin.repository.layout import is_model_name, is_utf8
from geadmin.repository.modelconfig import CONFIG_FILE

DEFAULT_UPLOAD_LIMIT_BYTES = 1024**3  # 1 GiB
UPLOAD_FIX = "copy large model files into the repository directly (scp, a volume) instead"


def safe_model_path(repository: Path, model: str, relative: str | PurePosixPath = "") -> Path:
    """`repository/model/relative`, refused (`RepositoryError`) unless it stays inside the
    repository: `model` one directory name, `relative` no `..`, not absolute, and no symlink
    on the way (existing components are checked; missing ones may be created)."""
    root = repository_root(repository)
    if not is_model_name(model):
        raise RepositoryError(f"refused model name {model!r}: a model name is one directory name of "
                              "UTF-8 text, without '/', '\\' or '..'")
    text = str(relative)
    if not is_utf8(text):
        raise RepositoryError(f"refused path {text!r}: it is not valid UTF-8 (bytes that are not text "
                              "in the file name); rename the file with a UTF-8 name")
    if "\0" in text or "\\" in text:
        raise RepositoryError(f"refused path {text!r}: it contains a backslash or NUL; use '/' "
                              "between the parts of a path inside the model directory")
    parts = PurePosixPath(text)
    if parts.is_absolute():
        raise RepositoryError(f"refused path {text!r}: absolute paths are not allowed; give a path "
                              f"inside the model directory, e.g. 1/model.om")
    if ".." in parts.parts:
        raise RepositoryError(f"refused path {text!r}: '..' would leave the model directory; give a "
                              "path inside it, e.g. 1/model.om")
    current = root / model
    on_the_way = [current]
    for part in parts.parts:
        current = current / part
        on_the_way.append(current)
    for step in on_the_way:
        if step.is_symlink():
            raise RepositoryError(f"refused {step}: it is a symbolic link, and geadmin never writes "
                                  "through one; replace it with a regular file or directory")
    if not current.resolve().is_relative_to(root):
        raise RepositoryError(f"refused {current}: it is outside the model repository {root}")
    return current


def repository_root(repository: Path) -> Path:
    """The repository as geadmin writes in it: resolved, and refused when it is not a directory."""
    root = Path(repository).expanduser().resolve()
    if not root.is_dir():
        raise RepositoryError(f"the model repository {root} does not exist: check --repository / "
                              "GEADMIN_REPOSITORY")
    return root


def config_path(repository: Path, model: str) -> Path:
    return safe_model_path(repository, model, CONFIG_FILE)


def check_upload_size(name: str, size_bytes: int, limit_bytes: int = DEFAULT_UPLOAD_LIMIT_BYTES) -> None:
    if size_bytes > limit_bytes:
        raise RepositoryError(
            f"refused {name!r}: it is {size_text(size_bytes)}, over the upload limit of "
            f"{size_text(limit_bytes)}; {UPLOAD_FIX}")


