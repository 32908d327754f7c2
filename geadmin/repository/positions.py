"""Where every field of a config.pbtxt sits: protobuf's own text-format parser, instrumented.

`locate` / `parse_located` parse exactly as `modelconfig.parse_pbtxt` does (same parser, same
errors) and record, for every value, the line and column the parser saw it at: findings of
the validator carry a line, and `geadmin.repository.rewrite` edits the user's text in place.
`comments` / `lost_comments` read the comments the parser skips.

This is the ONE module that relies on protobuf internals: it subclasses the private
`text_format._Parser` (overriding `_ParseOrMerge`, `_MergeField`, `_MergeMessageField`,
`_MergeScalarField`) and reads the tokenizer's `_line` / `_column`. A protobuf release may
change them: tests/unit/test_textformat_canary.py fails first, naming what moved, and
pyproject.toml bounds protobuf to the major versions checked.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from google.protobuf import text_format
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message
from tritonclient.grpc import model_config_pb2

from geadmin.errors import ConfigParseError
from geadmin.repository.modelconfig import CONFIG_FILE, parse_error

Point = tuple[int, int]  # (line, column), both 0-based, as the protobuf tokenizer counts
_PLACEHOLDER = re.compile(r"\[#\d+\]$")  # a map entry before its key is parsed


@dataclass(frozen=True)
class Site:
    """One value in the text: a scalar, a message `{...}`, one list element or map entry."""

    name_at: Point  # the field name that introduces it
    start: Point  # first character of the value (or of its `{`)
    end: Point  # just past the value (or its `}`)
    listed: bool  # written inside `name: [ ... ]`


@dataclass(frozen=True)
class FieldSite:
    """One occurrence of a field name: `name: value`, `name { }` or `name: [a, b]`."""

    name_at: Point
    end: Point  # past the last value (and a `,`/`;` separator after it)
    count: int  # how many values it holds


@dataclass
class Located:
    """A parsed config and where its fields are: `values` by element path (`input[0].dims[1]`,
    `parameters["device_ids"]`), `occurrences` by field path (`input[0].dims`), in text order."""

    config: model_config_pb2.ModelConfig
    text: str
    values: dict[str, Site] = field(default_factory=dict)
    occurrences: dict[str, list[FieldSite]] = field(default_factory=dict)
    error: ConfigParseError | None = None  # set by `locate` when the text does not parse
    error_path: str = ""  # the message being parsed when it failed

    def position(self, path: str) -> tuple[int, int] | None:
        """1-based (line, column) of `path`, or of its nearest ancestor written in the text."""
        while path:
            site = self.occurrences[path][0] if path in self.occurrences else self.values.get(path)
            if site is not None:
                return site.name_at[0] + 1, site.name_at[1] + 1
            path = parent_path(path)
        return None


def parent_path(path: str) -> str:
    """`input[0].dims` -> `input[0]` -> `input` -> ``; `parameters["a.b"]` -> `parameters`."""
    if path.endswith('"]'):
        return path[:path.rfind('["')]
    if path.endswith("]"):
        return path[:path.rfind("[")]
    return path[:max(path.rfind("."), 0)]


def parse_located(text: str, source: str = CONFIG_FILE) -> Located:
    """Parse like `parse_pbtxt`, recording the position of every field (the parser's own)."""
    located = locate(text, source)
    if located.error is not None:
        raise located.error
    return located


def locate(text: str, source: str = CONFIG_FILE) -> Located:
    """`parse_located` that never raises: a text that does not parse gives `error` and
    `error_path`, and `config` holds what was parsed before the error."""
    located = Located(model_config_pb2.ModelConfig(), text)
    parser = _LocatingParser(located)
    try:
        parser.ParseLines(text.split("\n"), located.config)
    except text_format.ParseError as exc:
        located.error, located.error_path = parse_error(exc, source), parser.failed_in or ""
    return located


class _Tokenizer(text_format.Tokenizer):
    """protobuf's tokenizer, remembering where the token it just consumed ended."""

    last_end: Point = (0, 0)
    last_token: str = ""

    def NextToken(self) -> None:
        self.last_end = (self._line, self._column + len(self.token))
        self.last_token = self.token
        super().NextToken()


class _LocatingParser(text_format._Parser):
    """protobuf's own text parser; the overrides only note positions around its steps."""

    def __init__(self, located: Located) -> None:
        super().__init__()
        self.located, self.prefix, self.serial = located, [""], 0
        self.frames: list[list[Any]] = []  # per field occurrence: [name_at, field path, values]
        self.keys: dict[str, str] = {}  # map entry placeholder -> its key
        self.failed_in: str | None = None  # the message being parsed when the parser failed

    def _ParseOrMerge(self, lines: Any, message: Message) -> None:
        tokenizer = _Tokenizer(lines)
        self.root_type = message.DESCRIPTOR.full_name
        while not tokenizer.AtEnd():
            self._MergeField(tokenizer, message)

    def _MergeField(self, tokenizer: _Tokenizer, message: Message) -> None:
        self.frames.append([(tokenizer._line, tokenizer._column), "", 0])
        self._guarded(super()._MergeField, self.prefix[-1], tokenizer, message)
        name_at, path, count = self.frames.pop()
        if path:
            site = FieldSite(name_at, tokenizer.last_end, count)
            self.located.occurrences.setdefault(path, []).append(site)

    def _guarded(self, step: Callable[..., None], where: str, *args: Any) -> None:
        try:
            step(*args)
        except text_format.ParseError:
            self.failed_in = self.failed_in if self.failed_in is not None else where
            raise

    def _merge_value(self, step: Callable[..., None], tokenizer: _Tokenizer, message: Message,
                     fd: FieldDescriptor) -> None:
        base = join_path(self.prefix[-1], fd.name)
        path = base
        if fd.label == FieldDescriptor.LABEL_REPEATED and fd.message_type is not None \
                and fd.message_type.GetOptions().map_entry:
            self.serial += 1
            path = f"{base}[#{self.serial}]"  # renamed once the entry's key is parsed
        elif fd.label == FieldDescriptor.LABEL_REPEATED:
            path = f"{base}[{len(getattr(message, fd.name))}]"
        start, listed = (tokenizer._line, tokenizer._column), tokenizer.last_token in ("[", ",")
        self.prefix.append(path)
        try:
            self._guarded(step, path, tokenizer, message, fd)
        finally:
            self.prefix.pop()
        if fd.name == "key" and _PLACEHOLDER.search(self.prefix[-1]):
            self.keys[self.prefix[-1]] = message.key  # a map entry's key
        if _PLACEHOLDER.search(path):
            path = self._rename(path, f"{base}[{json.dumps(self.keys.pop(path, ''))}]")
        frame = self.frames[-1]
        frame[1], frame[2] = base, frame[2] + 1
        self.located.values[path] = Site(frame[0], start, tokenizer.last_end, listed)

    def _rename(self, placeholder: str, path: str) -> str:
        tables: list[dict[str, Any]] = [self.located.values, self.located.occurrences]
        for table in tables:
            for old in [p for p in table if p.startswith(placeholder)]:
                table[path + old[len(placeholder):]] = table.pop(old)
        return path

    def _MergeMessageField(self, tokenizer: _Tokenizer, message: Message, fd: FieldDescriptor) -> None:
        self._merge_value(super()._MergeMessageField, tokenizer, message, fd)

    def _MergeScalarField(self, tokenizer: _Tokenizer, message: Message, fd: FieldDescriptor) -> None:
        self._merge_value(super()._MergeScalarField, tokenizer, message, fd)


def join_path(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name


# -- comments ---------------------------------------------------------------------------
def comments(text: str) -> list[str]:
    """Every `# ...` comment of a pbtxt text (a `#` inside a string is not one), in order.
    Never raises: the tokenizer accepts any text."""
    tokenizer = text_format.Tokenizer(text.split("\n"), skip_comments=False)
    found = []
    while not tokenizer.AtEnd():
        if tokenizer.token.startswith("#"):
            found.append(tokenizer.token.rstrip())
        tokenizer.NextToken()
    return found


def lost_comments(before: str, after: str) -> list[str]:
    """Comments of `before` that `after` no longer has (each counted as often as it occurs)."""
    return list((Counter(comments(before)) - Counter(comments(after))).elements())
