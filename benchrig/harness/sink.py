"""Where the harness sends what happens, as it happens.

The loop awaits ``episode_started``, each ``step`` and ``episode_finished``; a sink that writes to a
database must make each call durable before it returns, so a crash loses nothing that ran.
``ThreadedSink`` adapts a blocking sink (the Django one) by running every call on one dedicated
thread: writes stay ordered, one database connection is used, and the event loop never blocks.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol

from benchrig.harness.records import EpisodeKey, EpisodeRecord, StepRecord


class Sink(Protocol):
    async def episode_started(self, key: EpisodeKey) -> None: ...
    async def step(self, key: EpisodeKey, step: StepRecord) -> None: ...
    async def episode_finished(self, record: EpisodeRecord) -> None: ...


class BlockingSink(Protocol):
    def episode_started(self, key: EpisodeKey) -> None: ...
    def step(self, key: EpisodeKey, step: StepRecord) -> None: ...
    def episode_finished(self, record: EpisodeRecord) -> None: ...


class MemorySink:
    """Keeps everything in lists; used by tests and benchmarks."""

    def __init__(self) -> None:
        self.started: list[EpisodeKey] = []
        self.steps: dict[EpisodeKey, list[StepRecord]] = {}
        self.finished: list[EpisodeRecord] = []

    async def episode_started(self, key: EpisodeKey) -> None:
        self.started.append(key)
        self.steps[key] = []

    async def step(self, key: EpisodeKey, step: StepRecord) -> None:
        self.steps[key].append(step)

    async def episode_finished(self, record: EpisodeRecord) -> None:
        self.finished.append(record)


class ThreadedSink:
    def __init__(self, inner: BlockingSink) -> None:
        self.inner = inner
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="benchrig-sink")

    async def _run(self, fn: Callable[..., object], *args: object) -> None:
        await asyncio.get_running_loop().run_in_executor(self.pool, fn, *args)

    async def episode_started(self, key: EpisodeKey) -> None:
        await self._run(self.inner.episode_started, key)

    async def step(self, key: EpisodeKey, step: StepRecord) -> None:
        await self._run(self.inner.step, key, step)

    async def episode_finished(self, record: EpisodeRecord) -> None:
        await self._run(self.inner.episode_finished, record)

    def close(self) -> None:
        """Wait for pending writes, let the inner sink release its thread's resources, stop."""
        closer = getattr(self.inner, "close", None)
        if closer is not None:
            self.pool.submit(closer).result()
        self.pool.shutdown(wait=True)
