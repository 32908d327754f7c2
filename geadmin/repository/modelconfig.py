"""config.pbtxt <-> Triton's `ModelConfig` protobuf, through the real protobuf library.

The one reader of `config.pbtxt` in geadmin: a file that does not parse is reported with
the protobuf parser's own message, line and column (`line 12, column 15: Enum type
"inference.DataType" has no value named TYPE_FOO`), never a generic "cannot read".

- `parse_pbtxt` / `to_pbtxt`: text <-> proto. The round trip is semantic:
  `parse_pbtxt(to_pbtxt(c)) == c` for every config, but the writer drops fields at their
  default (`max_batch_size: 0`) and every comment.
- `to_file_text`: canonical text for a new file; keeps an explicit `max_batch_size: 0`,
  because Triton's auto-complete (onnxruntime, tensorflow, tensorrt) fills in a batch size
  when the field is absent, so dropping it changes what the server loads.
- `to_json` / `to_load_json` / `from_json`: the JSON the load API takes.

Two neighbours do the rest: `geadmin.repository.positions` parses while recording where every
field sits (the one module that subclasses protobuf's private text-format parser), and
`geadmin.repository.rewrite` writes a config edited through form controls back into the
user's text, keeping its comments.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

from google.protobuf import json_format, text_format
from tritonclient.grpc import model_config_pb2

from geadmin.errors import ConfigParseError, RepositoryError

CONFIG_FILE = "config.pbtxt"
MAX_CONFIG_BYTES = 4 << 20  # a large ensemble's config is tens of KiB; more is not a config
ModelConfig = model_config_pb2.ModelConfig


def parse_pbtxt(text: str, source: str = CONFIG_FILE) -> model_config_pb2.ModelConfig:
    """Parse pbtxt; `ConfigParseError` carries the parser's line and column."""
    try:
        return text_format.Parse(text, model_config_pb2.ModelConfig())
    except text_format.ParseError as exc:
        raise parse_error(exc, source) from exc


def parse_error(exc: text_format.ParseError, source: str) -> ConfigParseError:
    line, column = exc.GetLine(), exc.GetColumn()
    message = str(exc)
    prefix = f"{line}:{column} : "
    message = message.removeprefix(prefix) if line else message
    where = f"line {line}, column {column}: " if line else ""
    return ConfigParseError(f"{source} does not parse: {where}{message}", line=line or None,
                            column=column or None, detail=message)


def read_config_file(path: Path) -> model_config_pb2.ModelConfig:
    """Read and parse one config.pbtxt; every failure is a `RepositoryError` naming the file."""
    return parse_pbtxt(read_config_text(path), str(path))


def read_config_text(path: Path) -> str:
    try:
        return read_config_bytes(path).decode("utf-8")
    except FileNotFoundError as exc:
        raise RepositoryError(f"no {CONFIG_FILE} in {path.parent}") from exc
    except UnicodeDecodeError as exc:
        raise RepositoryError(f"{path} is not UTF-8 text (byte {exc.start})") from exc


def read_config_bytes(path: Path) -> bytes:
    """The bytes of the config.pbtxt at `path`, read only when it is a regular file of at most
    MAX_CONFIG_BYTES that is, or links to, a file inside its own model directory. Whoever can
    write the repository could otherwise make geadmin show, bundle or apply what they cannot
    read: a config.pbtxt linked to /etc/shadow, a FIFO that hangs the reader, /dev/zero. A link
    inside the directory is fine (a Kubernetes ConfigMap mounts its files as `..data/` links).
    `FileNotFoundError` when there is none; every other failure a `RepositoryError`."""
    directory = path.parent.resolve()
    target = path.resolve()
    if not target.is_relative_to(directory):
        raise RepositoryError(f"{path} links out of its model directory (to {target}): geadmin reads "
                              f"only a {CONFIG_FILE} kept in {path.parent} — replace the link with the "
                              "file itself")
    try:
        fd = os.open(target, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise RepositoryError(f"cannot read {path}: {exc.strerror or exc}") from exc
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise RepositoryError(f"{path} is not a regular file: replace it with the config text")
    with os.fdopen(fd, "rb") as handle:
        if info.st_size > MAX_CONFIG_BYTES:
            raise RepositoryError(f"{path} is {info.st_size:,} bytes, more than a config can be "
                                  f"({MAX_CONFIG_BYTES >> 20} MiB): is it the right file?")
        try:
            data = handle.read(MAX_CONFIG_BYTES + 1)
        except OSError as exc:
            raise RepositoryError(f"cannot read {path}: {exc.strerror or exc}") from exc
    if len(data) > MAX_CONFIG_BYTES:  # grew while it was read
        raise RepositoryError(f"{path} is larger than a config can be ({MAX_CONFIG_BYTES >> 20} MiB)")
    return data


def to_pbtxt(config: model_config_pb2.ModelConfig) -> str:
    return str(text_format.MessageToString(config))


def to_dict(config: model_config_pb2.ModelConfig) -> dict[str, Any]:
    return json_format.MessageToDict(config, preserving_proto_field_name=True)


def to_json(config: model_config_pb2.ModelConfig) -> str:
    """The JSON Triton's load API takes as a config override."""
    return json.dumps(to_dict(config))


def from_json(text: str) -> model_config_pb2.ModelConfig:
    """JSON (ours, or Triton's normalized `GET /v2/models/N/config`) -> proto."""
    try:
        return json_format.Parse(text, model_config_pb2.ModelConfig(), ignore_unknown_fields=False)
    # json_format lets a document that is not an object (`null`, `[]`) out as TypeError /
    # AttributeError, and deep nesting as RecursionError (tests/unit/test_parser_properties.py)
    except (json_format.ParseError, TypeError, AttributeError, RecursionError) as exc:
        raise ConfigParseError(f"the JSON config does not parse: {exc}", detail=str(exc)) from exc


def dtype_name(data_type: int) -> str:
    return str(model_config_pb2.DataType.Name(data_type)).removeprefix("TYPE_")


def to_file_text(config: model_config_pb2.ModelConfig) -> str:
    """Canonical pbtxt for a file, with `max_batch_size: 0` written out when it is 0: the fields
    before it, the line, then the fields after it (the printer writes fields in number order)."""
    text = to_pbtxt(config)
    if config.max_batch_size:
        return text
    number = ModelConfig.DESCRIPTOR.fields_by_name["max_batch_size"].number
    before, after = ModelConfig(), ModelConfig()
    before.CopyFrom(config)
    after.CopyFrom(config)
    for fd, _ in config.ListFields():
        (after if fd.number < number else before).ClearField(fd.name)
    return to_pbtxt(before) + "max_batch_size: 0\n" + to_pbtxt(after)
