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
- `parse_located`: the same parse, plus where every field sits in the text (for findings
  with a line, and for `rewrite`).
- `rewrite`: a config edited through form controls, written back into the user's text in
  place (changed values replaced, new fields inserted, removed ones cut), so comments and
  layout survive; `Rewrite.lost_comments` says what could not be kept.
- `to_json` / `to_load_json` / `from_json`: the JSON the load API takes.
"""

from __future__ import annotations

import functools
import io
import itertools
import json
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from google.protobuf import json_format, text_format
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message
from tritonclient.grpc import model_config_pb2

from geadmin.errors import ConfigParseError, RepositoryError

CONFIG_FILE = "config.pbtxt"
ModelConfig = model_config_pb2.ModelConfig
Point = tuple[int, int]  # (line, column), both 0-based, as the protobuf tokenizer counts
_PLACEHOLDER = re.compile(r"\[#\d+\]$")  # a map entry before its key is parsed


def parse_pbtxt(text: str, source: str = CONFIG_FILE) -> model_config_pb2.ModelConfig:
    """Parse pbtxt; `ConfigParseError` carries the parser's line and column."""
    try:
        return text_format.Parse(text, model_config_pb2.ModelConfig())
    except text_format.ParseError as exc:
        raise _parse_error(exc, source) from None


def _parse_error(exc: text_format.ParseError, source: str) -> ConfigParseError:
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
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise RepositoryError(f"no {CONFIG_FILE} in {path.parent}") from None
    except UnicodeDecodeError as exc:
        raise RepositoryError(f"{path} is not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise RepositoryError(f"cannot read {path}: {exc.strerror or exc}") from None


def to_pbtxt(config: model_config_pb2.ModelConfig) -> str:
    return str(text_format.MessageToString(config))


def to_dict(config: model_config_pb2.ModelConfig) -> dict[str, Any]:
    return json_format.MessageToDict(config, preserving_proto_field_name=True)


def to_json(config: model_config_pb2.ModelConfig) -> str:
    """The JSON Triton's load API takes as a config override."""
    return json.dumps(to_dict(config))


def to_load_json(config: model_config_pb2.ModelConfig) -> str:
    """`to_json` with `max_batch_size` always present (0 included: see `to_file_text`)."""
    return json.dumps({"max_batch_size": config.max_batch_size, **to_dict(config)})


def from_json(text: str) -> model_config_pb2.ModelConfig:
    """JSON (ours, or Triton's normalized `GET /v2/models/N/config`) -> proto."""
    try:
        return json_format.Parse(text, model_config_pb2.ModelConfig(), ignore_unknown_fields=False)
    except json_format.ParseError as exc:
        raise ConfigParseError(f"the JSON config does not parse: {exc}", detail=str(exc)) from None


def dtype_name(data_type: int) -> str:
    return str(model_config_pb2.DataType.Name(data_type)).removeprefix("TYPE_")


def to_file_text(config: model_config_pb2.ModelConfig) -> str:
    """Canonical pbtxt for a file, with `max_batch_size: 0` written out when it is 0."""
    text = to_pbtxt(config)
    if config.max_batch_size:
        return text
    by_name = ModelConfig.DESCRIPTOR.fields_by_name
    later = [sites[0].name_at[0] for path, sites in parse_located(text).occurrences.items()
             if path in by_name and by_name[path].number > by_name["max_batch_size"].number]
    lines = text.split("\n")
    at = min(later, default=len(lines) - 1)
    return "\n".join([*lines[:at], "max_batch_size: 0", *lines[at:]])


# -- where every field is ---------------------------------------------------------------
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
        located.error, located.error_path = _parse_error(exc, source), parser.failed_in or ""
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
        base = _join(self.prefix[-1], fd.name)
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


def _join(prefix: str, name: str) -> str:
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


# -- writing a changed config back into the user's text --------------------------------
@dataclass(frozen=True)
class Rewrite:
    text: str
    in_place: bool  # False: the text was regenerated (to_file_text), layout and comments gone
    lost_comments: tuple[str, ...]  # comments of the original the new text lacks: warn before applying


def rewrite(original: str, config: model_config_pb2.ModelConfig) -> Rewrite:
    """`config` as text, edited into `original` so its comments and layout survive.

    The result always parses to exactly `config`; when an in-place edit cannot guarantee
    that (or `original` does not parse), the text is regenerated and `lost_comments` lists
    what the user would lose."""
    try:
        located = parse_located(original)
    except ConfigParseError:
        located = None
    if located is not None:
        text = edit_in_place(located, config)
        if text is not None and _parses_to(text, config):
            return Rewrite(text, True, tuple(lost_comments(original, text)))
    text = to_file_text(config)
    return Rewrite(text, False, tuple(lost_comments(original, text)))


def _parses_to(text: str, config: model_config_pb2.ModelConfig) -> bool:
    try:
        return bool(parse_pbtxt(text) == config)
    except ConfigParseError:
        return False


def render_value(fd: FieldDescriptor, value: Any) -> str:
    out = io.StringIO()
    text_format.PrintFieldValue(fd, value, out, as_one_line=True)
    return out.getvalue().strip()


def render_field(fd: FieldDescriptor, value: Any, indent: int = 0, one_line: bool = False) -> str:
    out = io.StringIO()
    text_format.PrintField(fd, value, out, indent=indent, as_one_line=one_line)
    return out.getvalue().rstrip() if one_line else out.getvalue()


# -- the in-place editor behind `rewrite` -------------------------------------------------
_Piece = Callable[[int, bool], str]  # (indent, one line) -> the text of a field to insert


class _Editor:
    """Text edits at the parser's positions, applied together; None when they cannot be."""

    def __init__(self, located: Located) -> None:
        self.located = located
        self.lines = located.text.split("\n")
        self.starts = [0]
        for line in self.lines:
            self.starts.append(self.starts[-1] + len(line) + 1)
        self.edits: list[tuple[int, int, int, str]] = []  # start, end, order, new text

    def offset(self, point: Point) -> int:
        return self.starts[point[0]] + point[1]

    def replace(self, start: Point, end: Point, text: str) -> bool:
        self.edits.append((self.offset(start), self.offset(end), len(self.edits), text))
        return True

    def delete(self, site: FieldSite) -> bool:
        (line, col), (end_line, end_col) = site.name_at, site.end
        tail = self.lines[end_line][end_col:].strip()  # a trailing comment goes with its field
        if not self.lines[line][:col].strip() and (not tail or tail.startswith("#")):
            return self.replace((line, 0), (end_line + 1, 0), "") if end_line + 1 < len(self.lines) \
                else self.replace((line, 0), (end_line, len(self.lines[end_line])), "")
        return self.replace(site.name_at, site.end, "")

    def delete_value(self, path: str) -> bool:
        """Cut the occurrence that holds `path`, if it holds nothing else."""
        site = self.located.values.get(path)
        occurrence = next((o for o in self.located.occurrences.get(parent_field(path), [])
                           if site and o.name_at == site.name_at), None)
        return occurrence is not None and occurrence.count == 1 and self.delete(occurrence)

    def insert(self, parent: str, piece: _Piece) -> bool:
        """Add a field at the end of message `parent` ("" = the whole config)."""
        if not parent:
            text = self.located.text
            sep = "\n" if text and not text.endswith("\n") else ""
            at = len(self.lines) - 1
            return self.replace((at, len(self.lines[at])), (at, len(self.lines[at])), sep + piece(0, False))
        site = self.located.values.get(parent)
        if site is None:
            return False
        line, brace = site.end[0], site.end[1] - 1
        before = self.lines[line][:brace]
        if not before.strip():  # `}` on a line of its own
            return self.replace((line, 0), (line, 0), piece(len(before) + 2, False))
        return self.replace((line, brace), (line, brace), ("" if before.endswith(" ") else " ")
                            + piece(0, True) + " ")

    def apply(self) -> str | None:
        edits = sorted(self.edits)
        if any(a[1] > b[0] for a, b in itertools.pairwise(edits)):
            return None
        text = self.located.text
        for start, end, _, new in reversed(edits):
            text = text[:start] + new + text[end:]
        return text


def parent_field(path: str) -> str:
    """`input[0]` -> `input`; `parameters["k"]` -> `parameters`; `max_batch_size` unchanged."""
    return parent_path(path) if path.endswith("]") else path


def edit_in_place(located: Located, config: Message) -> str | None:
    """The text of `config` made by editing `located.text`; None if an edit is not possible."""
    editor = _Editor(located)
    return editor.apply() if _plan(editor, located.config, config, "") else None


def _plan(editor: _Editor, old: Message, new: Message, prefix: str) -> bool:
    for fd in new.DESCRIPTOR.fields:
        path = _join(prefix, fd.name)
        if fd.label == FieldDescriptor.LABEL_REPEATED:
            if fd.message_type is not None and fd.message_type.GetOptions().map_entry:
                ok = _plan_map(editor, old, new, fd, path, prefix)
            elif fd.message_type is not None:
                ok = _plan_messages(editor, old, new, fd, path, prefix)
            else:
                ok = _plan_scalars(editor, old, new, fd, path, prefix)
        else:
            ok = _plan_single(editor, old, new, fd, path, prefix)
        if not ok:
            return False
    return True


def _plan_single(editor: _Editor, old: Message, new: Message, fd: FieldDescriptor, path: str,
                 prefix: str) -> bool:
    before, after = getattr(old, fd.name), getattr(new, fd.name)
    had, has = (old.HasField(fd.name), new.HasField(fd.name)) if fd.has_presence else (True, True)
    if had and not has:
        return all(editor.delete(o) for o in editor.located.occurrences.get(path, []))
    if before == after and had == has:
        return True
    if had and fd.message_type is not None:
        return _plan(editor, before, after, path)
    site = editor.located.values.get(path) if had else None
    if site is not None:
        return editor.replace(site.start, site.end, render_value(fd, after))
    piece: _Piece = lambda indent, one: render_field(fd, after, indent, one)  # noqa: E731
    return editor.insert(prefix, piece)


def _plan_scalars(editor: _Editor, old: Message, new: Message, fd: FieldDescriptor, path: str,
                  prefix: str) -> bool:
    before, after = list(getattr(old, fd.name)), list(getattr(new, fd.name))
    if before == after:
        return True
    occurrences = editor.located.occurrences.get(path, [])
    listing = ", ".join(render_value(fd, v) for v in after)
    if not before or not occurrences:
        piece: _Piece = lambda indent, one: " " * indent + f"{fd.name}: [{listing}]" + "\n" * (not one)  # noqa: E731
        return not after or editor.insert(prefix, piece)
    first, *others = occurrences
    values = [editor.located.values[f"{path}[{i}]"] for i in range(len(before))]
    if not after:
        return all(editor.delete(o) for o in occurrences)
    if not others and values[0].listed:
        return editor.replace(values[0].start, values[-1].end, listing)
    return editor.replace(first.name_at, values[first.count - 1].end, f"{fd.name}: [{listing}]") and all(
        editor.delete(o) for o in others)


def _plan_messages(editor: _Editor, old: Message, new: Message, fd: FieldDescriptor, path: str,
                   prefix: str) -> bool:
    before, after = getattr(old, fd.name), getattr(new, fd.name)
    for i in range(min(len(before), len(after))):
        if before[i] != after[i] and not _plan(editor, before[i], after[i], f"{path}[{i}]"):
            return False
    added = [editor.insert(prefix, functools.partial(_render_at, fd, m)) for m in after[len(before):]]
    return all(added) and all(editor.delete_value(f"{path}[{i}]") for i in range(len(after), len(before)))


def _plan_map(editor: _Editor, old: Message, new: Message, fd: FieldDescriptor, path: str,
              prefix: str) -> bool:
    before, after = getattr(old, fd.name), getattr(new, fd.name)
    value_fd = fd.message_type.fields_by_name["value"]
    for key in after:
        entry_path = f"{path}[{json.dumps(key)}]"
        if key not in before:
            entry = after.GetEntryClass()(key=key)
            if value_fd.message_type is not None:
                entry.value.CopyFrom(after[key])
            else:
                entry.value = after[key]
            if not editor.insert(prefix, functools.partial(_render_at, fd, entry)):
                return False
        elif before[key] != after[key] and not _plan_map_value(editor, before[key], after[key], value_fd,
                                                                entry_path):
            return False
    return all(editor.delete_value(f"{path}[{json.dumps(key)}]") for key in before if key not in after)


def _plan_map_value(editor: _Editor, before: Any, after: Any, value_fd: FieldDescriptor,
                    entry_path: str) -> bool:
    site = editor.located.values.get(entry_path + ".value")
    if site is None:
        return False
    if value_fd.message_type is not None:
        return _plan(editor, before, after, entry_path + ".value")
    return editor.replace(site.start, site.end, render_value(value_fd, after))


def _render_at(fd: FieldDescriptor, value: Any, indent: int, one_line: bool) -> str:
    return render_field(fd, value, indent, one_line)
