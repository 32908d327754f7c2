"""A kustomize renderer for deploy/kubernetes, in Python, because no kubectl or kustomize
binary runs here (FACTS.md). It implements exactly the subset those manifests use, and
refuses everything else rather than render it differently from kustomize:

- a kustomization file (`kustomization.yaml`, `kustomization.yml` or `Kustomization`) with
  `apiVersion: kustomize.config.k8s.io/v1beta1`, `kind: Kustomization` and only the fields
  `resources` and `patches` (no namespace, prefixes, labels, images, generators, ...);
- `resources`: YAML files (one or more documents) and directories holding a kustomization;
  two objects with the same apiVersion, kind, namespace and name are an error, as in kustomize;
- `patches`: entries with only `path:` naming a strategic-merge patch, one object that names
  its target by apiVersion, kind, metadata.name (and metadata.namespace, when it has one),
  which must exist.

The strategic merge follows the Kubernetes API's own patch metadata, read from the OpenAPI
schemas of the `kubernetes-validate` package: maps merge key by key; a list whose field is
marked `x-kubernetes-patch-strategy: merge` merges its items by the field's
`x-kubernetes-patch-merge-key` (containers by `name`, volumeMounts by `mountPath`, ...); any
other list is replaced whole. Refused, with RenderError: directives (`$patch`, `$retainKeys`,
`$setElementOrder/...`, `$deleteFromPrimitiveList/...`), nulls (deletions), a field the
target kind's schema does not have (a typo would otherwise be added silently), merge lists of
primitives, and patches of kinds without a built-in schema (custom resources).
"""

from __future__ import annotations

import copy
import json
import re
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

KUSTOMIZATION_FILES = ("kustomization.yaml", "kustomization.yml", "Kustomization")
KUSTOMIZATION_API = "kustomize.config.k8s.io/v1beta1"
SUPPORTED_FIELDS = frozenset({"apiVersion", "kind", "resources", "patches"})
# The schema set whose patch metadata drives the merge (the newest the package ships).
SCHEMA_VERSION = "1.37.0"

Object = dict[str, Any]


class RenderError(Exception):
    """The kustomization uses something this renderer does not implement, or is wrong."""


def render(directory: Path) -> list[Object]:
    """Every object `kubectl kustomize DIRECTORY` prints, for the supported subset."""
    kustomization = _load_kustomization(directory)
    objects: list[Object] = []
    for entry in kustomization.get("resources") or []:
        path = (directory / str(entry)).resolve()
        if path.is_dir():
            objects.extend(render(path))
        elif path.is_file():
            objects.extend(load_documents(path))
        else:
            raise RenderError(f"{directory}: resource {entry!r} does not exist")
    seen: set[tuple[str, str, str, str]] = set()
    for obj in objects:
        key = object_id(obj)
        if key in seen:
            raise RenderError(f"{directory}: {describe(obj)} is defined twice")
        seen.add(key)
    for entry in kustomization.get("patches") or []:
        if not isinstance(entry, dict) or set(entry) != {"path"}:
            raise RenderError(f"{directory}: patch entry {entry!r}: only `- path: FILE` is supported")
        patch_file = directory / str(entry["path"])
        if not patch_file.is_file():
            raise RenderError(f"{directory}: patch file {entry['path']!r} does not exist")
        patches = load_documents(patch_file)
        if len(patches) != 1:
            raise RenderError(f"{patch_file}: a patch file must hold exactly one object")
        apply_patch(objects, patches[0], where=str(patch_file))
    return objects


def _load_kustomization(directory: Path) -> Object:
    found = [directory / name for name in KUSTOMIZATION_FILES if (directory / name).is_file()]
    if len(found) != 1:
        raise RenderError(f"{directory}: expected exactly one of {KUSTOMIZATION_FILES}, found {len(found)}")
    data = yaml.safe_load(found[0].read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise RenderError(f"{found[0]}: not a mapping")
    unsupported = sorted(set(data) - SUPPORTED_FIELDS)
    if unsupported:
        raise RenderError(
            f"{found[0]}: fields {unsupported} are not supported by tests/support/kube_render.py "
            f"(only {sorted(SUPPORTED_FIELDS)})"
        )
    if data.get("apiVersion") != KUSTOMIZATION_API or data.get("kind") != "Kustomization":
        raise RenderError(f"{found[0]}: expected apiVersion {KUSTOMIZATION_API} and kind Kustomization")
    return data


def load_documents(path: Path) -> list[Object]:
    documents = [doc for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")) if doc is not None]
    for doc in documents:
        if (
            not isinstance(doc, dict)
            or not doc.get("apiVersion")
            or not doc.get("kind")
            or not (doc.get("metadata") or {}).get("name")
        ):
            raise RenderError(
                f"{path}: every document must be an object with apiVersion, kind and metadata.name"
            )
    return documents


def object_id(obj: Object) -> tuple[str, str, str, str]:
    metadata = obj.get("metadata") or {}
    return (
        str(obj["apiVersion"]),
        str(obj["kind"]),
        str(metadata.get("namespace") or ""),
        str(metadata["name"]),
    )


def describe(obj: Object) -> str:
    api, kind, namespace, name = object_id(obj)
    return f"{kind} {namespace + '/' if namespace else ''}{name} ({api})"


def apply_patch(objects: list[Object], patch: Object, *, where: str) -> None:
    api, kind, namespace, name = object_id(patch)
    targets = [
        obj
        for obj in objects
        if object_id(obj)[:2] == (api, kind)
        and object_id(obj)[3] == name
        and (not namespace or object_id(obj)[2] == namespace)
    ]
    if len(targets) != 1:
        raise RenderError(
            f"{where}: patch target {describe(patch)} matches {len(targets)} objects, expected 1"
        )
    schema = kind_schema(api, kind)
    if schema is None:
        raise RenderError(
            f"{where}: {kind} ({api}) has no built-in schema: patching custom resources is not supported"
        )
    _merge(targets[0], patch, schema, path=kind)


# -- the strategic merge, driven by the schema's patch metadata --------------------------
def _merge(target: Object, patch: Object, schema: Object, *, path: str) -> None:
    for key, value in patch.items():
        where = f"{path}.{key}"
        if key.startswith("$"):
            raise RenderError(f"{where}: patch directives are not supported")
        if value is None:
            raise RenderError(f"{where}: null (a deletion) is not supported")
        field_schema = _field(schema, key, where)
        if isinstance(value, dict):
            if not isinstance(target.get(key), dict):
                target[key] = {}
            _merge(target[key], value, _resolve(field_schema), path=where)
        elif isinstance(value, list):
            target[key] = _merge_list(target.get(key), value, field_schema, where)
        else:
            target[key] = value


def _merge_list(current: Any, patch: list[Any], field_schema: Object, where: str) -> list[Any]:
    strategy = str(field_schema.get("x-kubernetes-patch-strategy", ""))
    if "merge" not in strategy.split(","):
        return copy.deepcopy(patch)  # no merge strategy: the patch's list replaces the old one
    merge_key = field_schema.get("x-kubernetes-patch-merge-key")
    item_schema = _resolve(_resolve(field_schema).get("items") or {})
    if not merge_key or not all(isinstance(item, dict) for item in patch):
        raise RenderError(f"{where}: merging lists of primitives is not supported")
    merged = copy.deepcopy(current) if isinstance(current, list) else []
    for item in patch:
        if merge_key not in item:
            raise RenderError(f"{where}: every item needs its merge key {merge_key!r}")
        match = next(
            (old for old in merged if isinstance(old, dict) and old.get(merge_key) == item[merge_key]), None
        )
        if match is None:
            match = {}
            merged.append(match)
        _merge(match, item, item_schema, path=f"{where}[{merge_key}={item[merge_key]}]")
    return merged


def _field(schema: Object, key: str, where: str) -> Object:
    properties = schema.get("properties")
    if isinstance(properties, dict) and key in properties:
        return dict(properties[key])
    extra = schema.get("additionalProperties")
    if isinstance(extra, dict):
        return dict(extra)
    raise RenderError(f"{where}: no such field in the schema")


def _resolve(node: Object) -> Object:
    """The node a `$ref` points to (definitions of the same schema set), else the node."""
    seen = 0
    while isinstance(node, dict) and "$ref" in node:
        node = _definitions()[str(node["$ref"]).rsplit("/", 1)[-1]]
        seen += 1
        if seen > 20:
            raise RenderError(f"schema reference loop at {node!r:.80}")
    return node


def _schema_dir() -> Any:
    return resources.files("kubernetes_validate").joinpath(
        "kubernetes-json-schema", f"v{SCHEMA_VERSION}-local-strict"
    )


@lru_cache(maxsize=1)
def _definitions() -> dict[str, Object]:
    return dict(json.loads(_schema_dir().joinpath("_definitions.json").read_text(encoding="utf-8"))["$defs"])


@lru_cache(maxsize=64)
def kind_schema(api_version: str, kind: str) -> Object | None:
    """The built-in kind's schema (the file name kubernetes-validate uses), None for a custom one."""
    api = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    ref = _schema_dir().joinpath(f"{kind.lower()}-{api}.json")
    if not ref.is_file():
        return None
    return dict(json.loads(ref.read_text(encoding="utf-8")))
