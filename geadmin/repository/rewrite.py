"""A config edited through form controls, written back into the user's config.pbtxt text.

`rewrite` edits in place at the parser's positions (`geadmin.repository.positions`): changed
values replaced, new fields inserted, removed ones cut, so comments and layout survive;
`Rewrite.lost_comments` says what could not be kept. The result always parses to exactly
the new config; when an in-place edit cannot guarantee that, the text is regenerated
(`modelconfig.to_file_text`).
"""

from __future__ import annotations

import functools
import io
import itertools
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from google.protobuf import text_format
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message
from tritonclient.grpc import model_config_pb2

from geadmin.errors import ConfigParseError
from geadmin.repository.modelconfig import parse_pbtxt, to_file_text
from geadmin.repository.positions import (
    FieldSite,
    Located,
    Point,
    join_path,
    lost_comments,
    parent_path,
    parse_located,
)


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
        path = join_path(prefix, fd.name)
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
