"""What on disk would stop a model from loading: directories, config, version dirs, model files.

Every finding is one sentence that names the path and, where there is one, the fix.
"""

from __future__ import annotations

import difflib
from pathlib import Path

from tritonclient.grpc import model_config_pb2

from geadmin.errors import RepositoryError
from geadmin.repository.modelconfig import CONFIG_FILE, read_config_file

# The file each backend / platform loads from a version directory (any one of them).
MODEL_FILES: dict[str, tuple[str, ...]] = {
    "python": ("model.py",),
    "onnxruntime": ("model.onnx",),
    "onnxruntime_onnx": ("model.onnx",),
    "pytorch": ("model.pt",),
    "pytorch_libtorch": ("model.pt",),
    "tensorflow": ("model.savedmodel", "model.graphdef"),
    "tensorflow_savedmodel": ("model.savedmodel",),
    "tensorflow_graphdef": ("model.graphdef",),
    "tensorrt": ("model.plan",),
    "tensorrt_plan": ("model.plan",),
    "openvino": ("model.xml",),
    "npu_ge": ("model.om", "model.onnx", "model.pb"),
}
# Platforms older Ascend guides write, and what Triton needs instead.
ASCEND_PLATFORMS: dict[str, str] = {
    "graph_executor": "npu_ge",
}


def is_model_name(name: str) -> bool:
    """One directory name inside the repository: never a path that leaves it, and UTF-8 text
    (a name from argv or the file system may hold lone surrogates: no database, URL or Triton
    takes it)."""
    return (name not in ("", ".", "..") and not any(c in name for c in "/\\\0")
            and is_utf8(name))


def is_utf8(text: str) -> bool:
    """Whether `text` can be written as UTF-8 (no lone surrogates from undecodable bytes)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def model_dir(repository: Path, name: str) -> Path:
    if not is_model_name(name):
        raise RepositoryError(f"{name!r} is not a model name (one directory name, without '/' or '..')")
    return repository / name


def read_model_config(repository: Path, name: str) -> model_config_pb2.ModelConfig:
    """`name`'s config.pbtxt as written (not normalized); RepositoryError says what is wrong."""
    return read_config_file(model_dir(repository, name) / CONFIG_FILE)


def layout_problems(
    repository: Path, name: str, config: model_config_pb2.ModelConfig | None = None
) -> list[str]:
    """What on disk would stop `name` from loading. `config` overrides config.pbtxt."""
    try:
        directory = model_dir(repository, name)
        if not directory.is_dir():
            return [f"no model directory {directory}" + _did_you_mean(repository, name)]
        if config is None:
            config = read_config_file(directory / CONFIG_FILE)
        return _config_problems(directory, name, config) + _version_problems(directory, config)
    except RepositoryError as exc:
        return [str(exc)]
    except OSError as exc:
        return [f"cannot read {repository / name}: {exc.strerror or exc}"]


def _did_you_mean(repository: Path, name: str) -> str:
    if not repository.is_dir():
        return f" (the repository {repository} itself does not exist)"
    close = difflib.get_close_matches(name, [p.name for p in repository.iterdir() if p.is_dir()], n=1)
    return f" — did you mean {close[0]!r}?" if close else ""


def _config_problems(directory: Path, name: str, config: model_config_pb2.ModelConfig) -> list[str]:
    problems = []
    if config.name and config.name != name:
        problems.append(f"{directory / CONFIG_FILE} says name: {config.name!r}, but the directory is "
                        f"{name!r}; they must match")
    backend = ASCEND_PLATFORMS.get(config.platform)
    if backend:
        problems.append(f"platform {config.platform!r} is not a Triton platform (older Ascend guides "
                        f'write it): replace it with backend: "{backend}" in {directory / CONFIG_FILE}')
    return problems


def backend_of(config: model_config_pb2.ModelConfig) -> str:
    """The backend that will load the model (an Ascend platform counts as its backend)."""
    return config.backend or ASCEND_PLATFORMS.get(config.platform, config.platform)


def _version_problems(directory: Path, config: model_config_pb2.ModelConfig) -> list[str]:
    versions = sorted(int(p.name) for p in directory.iterdir()
                      if p.is_dir() and p.name.isascii() and p.name.isdigit())
    if not versions:
        return [f"no version directory in {directory} (e.g. {directory / '1'})"]
    wanted = list(config.version_policy.specific.versions) if config.version_policy.HasField(
        "specific") else [versions[-1]]
    problems = [f"version_policy asks for version {v}, but {directory / str(v)} does not exist"
                for v in wanted if v not in versions]
    kind = backend_of(config)
    expected = (config.default_model_filename,) if config.default_model_filename else MODEL_FILES.get(kind)
    for version in (v for v in wanted if v in versions):
        version_dir = directory / str(version)
        if expected and not any((version_dir / file).exists() for file in expected):
            found = sorted(p.name for p in version_dir.iterdir() if not p.name.startswith("."))
            seen = f"; it holds {', '.join(found)}" if found else "; it is empty"
            problems.append(f"no {' or '.join(expected)} in {version_dir} (the {kind!r} backend "
                            f"loads it){seen}")
    return problems
