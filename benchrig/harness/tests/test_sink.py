"""LanedSink: a blocking sink's calls on writer threads, ordered per episode, parallel across."""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from benchrig.harness.records import EpisodeKey, EpisodeRecord, StepRecord
from benchrig.harness.sink import LanedSink


class SlowSink:
    """Records (thread, key, event, start, end) for every call; each call blocks 50 ms."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, str, float, float]] = []
        self.lock = threading.Lock()

    def _log(self, key: EpisodeKey, event: str) -> None:
        start = time.perf_counter()
        time.sleep(0.05)
        with self.lock:
            self.calls.append(
                (threading.current_thread().name, key.task_id, event, start, time.perf_counter())
            )

    def episode_started(self, key: EpisodeKey) -> None:
        self._log(key, "start")

    def step(self, key: EpisodeKey, step: StepRecord) -> None:
        self._log(key, f"step{step.index}")

    def episode_finished(self, record: EpisodeRecord) -> None:
        self._log(record.key, "finish")


def record(key: EpisodeKey) -> EpisodeRecord:
    answer = ("42", "42", "42", "", "")  # final answer, expected, got, detail, error
    return EpisodeRecord(key, "passed", *answer, 5, 1, 1, 0, False, 1.0, 0, 0, 0, 2, 1.0)


def test_each_episode_stays_ordered_on_one_lane_and_lanes_run_in_parallel() -> None:
    inner, finished = SlowSink(), []
    lanes = [ThreadPoolExecutor(1, thread_name_prefix=f"lane{i}") for i in range(2)]
    sink = LanedSink(inner, lanes, on_finished=lambda r: finished.append(r.key.task_id))

    async def episode(task_id: str) -> None:
        key = EpisodeKey(task_id, "axis", 0)
        await sink.episode_started(key)
        for i in range(3):
            await sink.step(key, StepRecord(index=i, role="user"))
        await sink.episode_finished(record(key))

    async def main() -> None:
        await asyncio.gather(*(episode(name) for name in ("a", "b", "c", "d")))

    asyncio.run(main())
    for lane in lanes:
        lane.shutdown()
    for task_id in "abcd":
        calls = [c for c in inner.calls if c[1] == task_id]
        assert [c[2] for c in calls] == ["start", "step0", "step1", "step2", "finish"]
        assert len({c[0] for c in calls}) == 1  # one lane per episode
    # Both lanes worked, at the same time: some call on one overlapped a call on the other.
    assert {c[0] for c in inner.calls} == {"lane0_0", "lane1_0"}
    assert any(
        a[0] != b[0] and a[3] < b[4] and b[3] < a[4] for a in inner.calls for b in inner.calls
    )
    assert sorted(finished) == ["a", "b", "c", "d"] and sink.lane == {}


def test_a_laned_sink_needs_a_lane() -> None:
    with pytest.raises(ValueError, match="at least one lane"):
        LanedSink(SlowSink(), [])
