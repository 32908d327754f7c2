"""What geadmin asks of Triton (through tritonclient), over HTTP or gRPC: the one facade.

Both transports return the same types: protobuf messages from Triton's own service and
model-config schemas, or the value types of `geadmin.domain`. How each call travels — its
timeout (loads a longer one: a load can hang, FACTS.md), its thread, the admin key on restricted
calls only, and the one translation of failures into `TritonError`s — is
`geadmin.triton.connection`; tensors of requests and responses are `geadmin.triton.tensors`;
which server a key belongs to is `geadmin.triton.servers`.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from google.protobuf import json_format
from google.protobuf.message import Message
from tritonclient.grpc import model_config_pb2, service_pb2

from geadmin.domain import DEFAULT_PORTS, Health, ModelEntry, ModelState, ServerInfo, Transport
from geadmin.errors import InvalidArgumentError, WrongProtocolError
from geadmin.triton.connection import Connection
from geadmin.triton.tensors import InferResponse, Tensor, _infer_inputs, _requested_outputs, _response

T = TypeVar("T")
M = TypeVar("M", bound=Message)


# -- the client -----------------------------------------------------------------------
class TritonClient(Connection):
    """What geadmin asks of one Triton endpoint: Triton's API over a `Connection`
    (geadmin.triton.connection: the transport, timeouts, threads and the admin key). Safe to
    share between threads."""

    @property
    def transport(self) -> Transport:
        return self.endpoint.transport

    # -- server ---------------------------------------------------------------------
    def is_live(self) -> bool:
        return bool(self.call("check liveness", lambda c, kw: c.is_server_live(**kw), read=True,
                              server_check=True))

    def is_ready(self) -> bool:
        return bool(self.call("check readiness", lambda c, kw: c.is_server_ready(**kw), read=True,
                              server_check=True))

    def health(self) -> Health:
        live = self.is_live()
        return Health(live=live, ready=live and self.is_ready())

    def server_info(self) -> ServerInfo:
        meta = self.message(
            "read server metadata",
            lambda c, kw: c.get_server_metadata(**kw),
            service_pb2.ServerMetadataResponse,
            read=True,
            server_check=True,
        )
        return ServerInfo(meta.name, meta.version, tuple(meta.extensions))

    def model_ready(self, name: str, version: str = "") -> bool:
        """Whether Triton would serve `name` (a version, or the latest) right now."""
        return bool(self.call(
            f"check readiness of {name!r}", lambda c, kw: c.is_model_ready(name, version, **kw), read=True
        ))

    # -- repository -----------------------------------------------------------------
    def repository_index(self) -> list[ModelEntry]:
        def fetch(client: Any, kwargs: dict[str, Any]) -> Any:
            raw = client.get_model_repository_index(**kwargs)
            if isinstance(raw, list):
                return {"models": raw}
            if isinstance(client, httpclient.InferenceServerClient):  # Triton's HTTP index is a list
                raise WrongProtocolError(
                    f"list the model repository: {self.url} answered, but not as Triton does (a JSON "
                    f"{type(raw).__name__} where Triton lists its models) — another service answers there: "
                    f"give Triton's HTTP port (default {DEFAULT_PORTS['http']})", url=self.url)
            return raw

        index = self.message("list the model repository", fetch, service_pb2.RepositoryIndexResponse,
                              restricted=True, read=True)
        # Triton lists every directory, hidden ones too; those are never models (geadmin's own
        # staging directories of a model being created, editors' and rsync's temporaries).
        return sorted(
            (ModelEntry(m.name, m.version, ModelState.parse(m.state), m.reason) for m in index.models
             if not m.name.startswith(".")),
            key=lambda entry: (entry.name, entry.version),
        )

    def load(
        self,
        name: str,
        *,
        config: str | Mapping[str, Any] | model_config_pb2.ModelConfig | None = None,
        files: Mapping[str, bytes] | None = None,
    ) -> None:
        """Load (or reload) a model, optionally overriding its config and files.

        `files` maps paths inside the model directory (e.g. "1/model.py") to contents;
        Triton accepts them only together with `config` (FACTS.md).
        """
        self.call(f"load model {name!r}", self._load_fn(name, config, files), loading=True, restricted=True)

    def start_load(
        self,
        name: str,
        *,
        config: str | Mapping[str, Any] | model_config_pb2.ModelConfig | None = None,
        files: Mapping[str, bytes] | None = None,
    ) -> PendingLoad:
        """`load` on a thread of its own, returning at once, so the caller can watch Triton's
        log while it works and give up on a load that hangs without being held by it: the
        thread is a daemon with its own HTTP connection, and nothing waits for it at exit."""
        fn = self._load_fn(name, config, files)
        action = f"load model {name!r}"
        if self.endpoint.transport is Transport.GRPC:
            return PendingLoad(lambda: self.call(action, fn, loading=True, restricted=True), name)
        return PendingLoad(lambda: self.one_off_call(action, fn), name)

    def _load_fn(
        self,
        name: str,
        config: str | Mapping[str, Any] | model_config_pb2.ModelConfig | None,
        files: Mapping[str, bytes] | None,
    ) -> Callable[[Any, dict[str, Any]], Any]:
        if files and config is None:
            raise InvalidArgumentError("file overrides need a config override too (Triton ignores them "
                                       "alone)")
        config_json = load_json(config) if config is not None else None
        overrides = {f"file:{path}": data for path, data in (files or {}).items()} or None
        return lambda c, kw: c.load_model(name, config=config_json, files=overrides, **kw)


    def reload(self, name: str) -> None:
        """Triton reloads a loaded model when asked to load it again."""
        self.load(name)

    def unload(self, name: str, *, dependents: bool = False) -> None:
        self.call(
            f"unload model {name!r}",
            lambda c, kw: c.unload_model(name, unload_dependents=dependents, **kw),
            restricted=True,
        )

    # -- models ---------------------------------------------------------------------
    def model_config(self, name: str, version: str = "") -> model_config_pb2.ModelConfig:
        def fetch(client: Any, kwargs: dict[str, Any]) -> Any:
            raw = client.get_model_config(name, version, **kwargs)
            return raw if "config" in raw else {"config": raw}

        response = self.message(
            f"read the config of {name!r}", fetch, service_pb2.ModelConfigResponse, restricted=True,
            read=True,
        )
        return response.config

    def model_metadata(self, name: str, version: str = "") -> service_pb2.ModelMetadataResponse:
        return self.message(
            f"read the metadata of {name!r}",
            lambda c, kw: c.get_model_metadata(name, version, **kw),
            service_pb2.ModelMetadataResponse,
            read=True,
        )

    def model_statistics(self, name: str = "", version: str = "") -> list[service_pb2.ModelStatistics]:
        response = self.message(
            f"read statistics of {name or 'all models'!r}",
            lambda c, kw: c.get_inference_statistics(name, version, **kw),
            service_pb2.ModelStatisticsResponse,
            read=True,
        )
        return list(response.model_stats)

    def infer(
        self,
        name: str,
        inputs: Sequence[Tensor],
        *,
        outputs: Sequence[str] = (),
        class_count: int = 0,
        version: str = "",
    ) -> InferResponse:
        """One inference request; the response's outputs come in Triton's order.

        `outputs` empty asks for every output. `class_count` > 0 asks Triton's
        classification extension for the top classes of each requested output (BYTES
        "score:index[:label]"). Tensors travel as binary data on both transports (BF16
        as float32 arrays, truncated by tritonclient).
        """
        def call(client: Any, kwargs: dict[str, Any]) -> InferResponse:
            module: Any = grpcclient if isinstance(client, grpcclient.InferenceServerClient) else httpclient
            result = client.infer(name, _infer_inputs(module, inputs), model_version=version,
                                  outputs=_requested_outputs(module, outputs, class_count), **kwargs)
            return _response(result)

        return self.call(f"infer with {name!r}", call)

    # -- logging --------------------------------------------------------------------
    def log_settings(self) -> dict[str, Any]:
        # Flattened inside the call, so an unexpected answer is translated like any failure.
        return self.call("read log settings",
                          lambda c, kw: _plain_log_settings(c.get_log_settings(**kw, **_as_json(c))),
                          restricted=True, read=True)

    def update_log_settings(self, **settings: Any) -> dict[str, Any]:
        """E.g. `update_log_settings(log_verbose_level=1)`; returns the new settings."""
        return self.call(
            "change log settings",
            lambda c, kw: _plain_log_settings(c.update_log_settings(settings, **kw, **_as_json(c))),
            restricted=True,
        )

    # -- tracing (TIMESTAMPS only: geadmin never asks for TENSORS) ------------------------
    def trace_settings(self, model: str = "") -> dict[str, Any]:
        """The trace settings of `model` (its own, else the global ones), or the global ones."""
        return self.call("read trace settings",
                         lambda c, kw: _plain_log_settings(c.get_trace_settings(model_name=model or None,
                                                                                **kw, **_as_json(c))),
                         restricted=True, read=True)

    def update_trace_settings(self, model: str, settings: Mapping[str, Any]) -> dict[str, Any]:
        """Change `model`'s trace settings (a None value clears one back to the global
        setting); returns the effective ones."""
        return self.call("change trace settings",
                         lambda c, kw: _plain_log_settings(c.update_trace_settings(
                             model_name=model, settings=dict(settings), **kw, **_as_json(c))),
                         restricted=True)

    def __enter__(self) -> TritonClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()



class PendingLoad:
    """A load running on its own daemon thread (`TritonClient.start_load`)."""

    def __init__(self, run: Callable[[], object], name: str) -> None:
        self._done = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(run,), daemon=True,
                                        name=f"geadmin-load-{name}")
        self._thread.start()

    def _run(self, run: Callable[[], object]) -> None:
        try:
            run()
        except BaseException as exc:  # handed to the caller by result()
            self._error = exc
        finally:
            self._done.set()

    def wait(self, timeout_s: float | None) -> bool:
        """True when the load answered within `timeout_s`."""
        return self._done.wait(timeout_s)

    def result(self) -> None:
        """Raise what the load raised (a TritonError), if anything."""
        if self._error is not None:
            raise self._error


def _as_json(client: Any) -> dict[str, Any]:
    return {"as_json": True} if isinstance(client, grpcclient.InferenceServerClient) else {}


def load_json(config: str | Mapping[str, Any] | model_config_pb2.ModelConfig) -> str:
    """The config override of a load as Triton's JSON. A ModelConfig keeps `max_batch_size`
    even at 0 (protobuf's writer drops a zero): left out, Triton's auto-complete may give a
    model that must not batch a max_batch_size of its own."""
    if isinstance(config, model_config_pb2.ModelConfig):
        return json.dumps({"max_batch_size": config.max_batch_size,
                           **json_format.MessageToDict(config, preserving_proto_field_name=True)})
    if isinstance(config, str):
        return config
    return json.dumps(dict(config))


def _plain_log_settings(raw: Mapping[str, Any]) -> dict[str, Any]:
    """gRPC wraps each value as {"settings": {k: {"boolParam": ...}}}; HTTP sends it flat."""
    settings = raw.get("settings", raw)
    plain: dict[str, Any] = {}
    for key, value in settings.items():
        if isinstance(value, Mapping) and len(value) == 1:
            (value,) = value.values()
        plain[key] = value
    return plain
