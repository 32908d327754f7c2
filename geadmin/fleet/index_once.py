"""A Triton client that reads a server's repository index once per change it makes.

A rollout step asks each server's index many questions: is the model READY before (the gate),
does Triton list it (the apply's refusal), which models are READY (the impact snapshot, the
load watch), and after the change what serves now (the apply's check, the impact's changes,
the gate again). Each was a read of the whole index, about 7 per server and step. This client
keeps the last index it read and answers from it until it changes something on that server:
any load, reload or unload forgets it, so the first read after a change goes to Triton. An
index is not kept while a model in it is on the move — a version LOADING, or a model UNLOADING
with no version READY — so a wait for it to settle polls Triton; nor one read while a load of
this client's runs. A retired version UNLOADING beside a READY one (a version policy that
dropped it) is Triton's own clean-up after the load answered: the model serves, the index is
kept.

What a kept index does not see: a change made by someone else between this client's read
and its next change. The rollout takes its first read in the gate's measurement just before
the wave steps (geadmin.fleet.gate), and a server's own load answers for itself.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from tritonclient.grpc import model_config_pb2

from geadmin.domain import ModelEntry, ModelState
from geadmin.triton.client import PendingLoad, TritonClient


class IndexOnceClient(TritonClient):
    def __init__(self, url: str, **kwargs: Any) -> None:
        super().__init__(url, **kwargs)
        self._kept: list[ModelEntry] | None = None
        self._changes = 0  # counts the changes started, so a read that raced one is not kept
        self._pending: list[PendingLoad] = []
        self._kept_lock = threading.Lock()

    def repository_index(self) -> list[ModelEntry]:
        with self._kept_lock:
            if self._kept is not None:
                return list(self._kept)
            changes, busy = self._changes, self._loading()
        index = super().repository_index()
        with self._kept_lock:
            if not busy and changes == self._changes and not self._loading() and settled(index):
                self._kept = list(index)
        return index

    def forget(self) -> None:
        """The next read goes to Triton."""
        with self._kept_lock:
            self._kept = None
            self._changes += 1

    def load(self, name: str, *, config: str | Mapping[str, Any] | model_config_pb2.ModelConfig | None = None,
             files: Mapping[str, bytes] | None = None) -> None:
        self.forget()
        try:
            super().load(name, config=config, files=files)
        finally:
            self.forget()

    def start_load(self, name: str, *,
                   config: str | Mapping[str, Any] | model_config_pb2.ModelConfig | None = None,
                   files: Mapping[str, bytes] | None = None) -> PendingLoad:
        self.forget()
        pending = super().start_load(name, config=config, files=files)
        with self._kept_lock:
            self._pending.append(pending)
        return pending

    def unload(self, name: str, *, dependents: bool = False) -> None:
        self.forget()
        try:
            super().unload(name, dependents=dependents)
        finally:
            self.forget()

    def _loading(self) -> bool:
        """Whether a load this client started still runs (called under the lock)."""
        self._pending = [p for p in self._pending if not p.wait(0)]
        return bool(self._pending)


def settled(index: list[ModelEntry]) -> bool:
    """No version LOADING, and no model UNLOADING without a version READY."""
    ready = {entry.name for entry in index if entry.state is ModelState.READY}
    return not any(entry.state is ModelState.LOADING
                   or (entry.state is ModelState.UNLOADING and entry.name not in ready) for entry in index)
