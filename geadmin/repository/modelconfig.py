"""config.pbtxt <-> Triton's `ModelConfig` protobuf, through the real protobuf library.

The one reader of `config.pbtxt` in geadmin: a file that does not parse is reported with
the protobuf parser's own message, line and column (`line 12, column 15: Enum type
"inference.DataType" has no value named TYPE_FOO`), never a generic "cannot read".
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from google.protobuf import json_format, text_format
from tritonclient.grpc import model_config_pb2

from geadmin.errors import ConfigParseError, RepositoryError

CONFIG_FILE = "config.pbtxt"
ModelConfig = model_config_pb2.ModelConfig


def parse_pbtxt(text: str, source: str = CONFIG_FILE) -> model_config_pb2.ModelConfig:
    """Parse pbtxt; `ConfigParseError` carries the parser's line and column."""
    try:
        return text_format.Parse(text, model_config_pb2.ModelConfig())
    except text_format.ParseError as exc:
        line, column = exc.GetLine(), exc.GetColumn()
        message = str(exc)
        prefix = f"{line}:{column} : "
        message = message.removeprefix(prefix) if line else message
        where = f"line {line}, column {column}: " if line else ""
        raise ConfigParseError(f"{source} does not parse: {where}{message}", line=line or None,
                               column=column or None, detail=message) from None


def read_config_file(path: Path) -> model_config_pb2.ModelConfig:
    """Read and parse one config.pbtxt; every failure is a `RepositoryError` naming the file."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise RepositoryError(f"no {CONFIG_FILE} in {path.parent}") from None
    except UnicodeDecodeError as exc:
        raise RepositoryError(f"{path} is not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise RepositoryError(f"cannot read {path}: {exc.strerror or exc}") from None
    return parse_pbtxt(text, str(path))


def to_pbtxt(config: model_config_pb2.ModelConfig) -> str:
    return str(text_format.MessageToString(config))


def to_dict(config: model_config_pb2.ModelConfig) -> dict[str, Any]:
    return json_format.MessageToDict(config, preserving_proto_field_name=True)


def to_json(config: model_config_pb2.ModelConfig) -> str:
    """The JSON Triton's load API takes as a config override."""
    return json.dumps(to_dict(config))


def dtype_name(data_type: int) -> str:
    return str(model_config_pb2.DataType.Name(data_type)).removeprefix("TYPE_")
