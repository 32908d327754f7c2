"""A TCP proxy on 127.0.0.1 that holds every chunk for half a round trip each way: a server on
this machine as one across a network with `rtt_ms` of round trip (benchmarks/fleet.py). It
adds latency only; bandwidth, loss and the server's own work are untouched."""

from __future__ import annotations

import asyncio
import threading
from contextlib import suppress

from geadmin.stack.processes import free_port


class DelayProxy:
    def __init__(self, upstream_port: int, rtt_ms: float) -> None:
        self.upstream_port = upstream_port
        self.half_s = rtt_ms / 2000.0
        self.port = free_port()
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name=f"delay-proxy-{self.port}")

    def __enter__(self) -> DelayProxy:
        self._thread.start()
        assert self._ready.wait(10), "the delay proxy did not start"
        return self

    def __exit__(self, *exc: object) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(asyncio.start_server(self._serve, "127.0.0.1", self.port))
        self._ready.set()
        try:
            self._loop.run_forever()
        finally:
            server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        except OSError:
            writer.close()
            return
        await asyncio.gather(self._pump(reader, up_writer), self._pump(up_reader, writer))

    async def _pump(self, source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        with suppress(OSError, asyncio.IncompleteReadError):
            while chunk := await source.read(65536):
                await asyncio.sleep(self.half_s)
                sink.write(chunk)
                await sink.drain()
        with suppress(OSError):
            sink.close()
