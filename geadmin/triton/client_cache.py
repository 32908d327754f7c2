"""A bounded cache of clients: at most `capacity`, the least recently used one closed when a
new one would go over.

A TritonClient owns worker threads, each with its own event loop and connection, that live
until it is closed: caching one per server is right (a page's poll must not make threads
every few seconds), caching one per address discovery ever returned is a leak that an
attacker who answers DNS or runs pods can grow at will. `ClientCache` keeps the recent ones.

A client evicted while a caller still uses it is closed when that caller gives it back
(`borrow`), never under it; `get` is for callers that hold no client across an eviction
(one poll, then done).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from typing import Generic, Protocol, TypeVar


class Closeable(Protocol):
    def close(self) -> None: ...


K = TypeVar("K", bound=Hashable)
C = TypeVar("C", bound=Closeable)

DEFAULT_CAPACITY = 64


class ClientCache(Generic[K, C]):
    def __init__(self, make: Callable[[K], C], *, capacity: int = DEFAULT_CAPACITY) -> None:
        if capacity < 1:
            raise ValueError(f"a client cache holds at least one client, got capacity {capacity}")
        self._make = make
        self.capacity = capacity
        self._clients: OrderedDict[K, C] = OrderedDict()
        self._users: dict[int, int] = {}  # id(client) -> callers borrowing it now
        self._evicted: dict[int, C] = {}  # evicted while borrowed: closed at the last give-back
        self._lock = threading.Lock()

    def __len__(self) -> int:
        with self._lock:
            return len(self._clients)

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._clients

    def get(self, key: K) -> C:
        """The client for `key`, made on first use; the least recently used one beyond
        `capacity` is closed (after its last borrower gives it back)."""
        with self._lock:
            client, evicted = self._take(key)
        self._close(evicted)
        return client

    @contextmanager
    def borrow(self, key: K) -> Iterator[C]:
        """The client for `key`, never closed while the `with` block runs."""
        with self._lock:
            client, evicted = self._take(key)
            self._users[id(client)] = self._users.get(id(client), 0) + 1
        self._close(evicted)
        try:
            yield client
        finally:
            with self._lock:
                left = self._users[id(client)] - 1
                if left:
                    self._users[id(client)] = left
                else:
                    del self._users[id(client)]
                done = self._evicted.pop(id(client), None) if not left else None
            self._close([done] if done is not None else [])

    def close(self) -> None:
        """Close every client (a command about to exit); borrowed ones when given back."""
        with self._lock:
            evicted = [self._evict_locked(key) for key in list(self._clients)]
        self._close([c for c in evicted if c is not None])

    def _take(self, key: K) -> tuple[C, list[C]]:
        """Under the lock: the client (made, or moved to most recent), and the ones to close now."""
        client = self._clients.get(key)
        if client is not None:
            self._clients.move_to_end(key)
            return client, []
        client = self._make(key)
        self._clients[key] = client
        evicted = []
        while len(self._clients) > self.capacity:
            closing = self._evict_locked(next(iter(self._clients)))
            if closing is not None:
                evicted.append(closing)
        return client, evicted

    def _evict_locked(self, key: K) -> C | None:
        client = self._clients.pop(key)
        if self._users.get(id(client)):
            self._evicted[id(client)] = client  # its borrower closes it
            return None
        return client

    @staticmethod
    def _close(clients: list[C]) -> None:
        for client in clients:
            client.close()
