"""Harness overhead: agentic-v1 × 4 trials against a loopback server with a fixed delay.

Prints, at concurrency 1 and 16: wall time, the ideal wall time, their ratio, and the harness's
CPU time per step. The server runs in its own process so its CPU is not counted; the scripted
model asks for two tool calls with missing arguments (answered by the tool's validation, no
sandbox) and then answers, so every step is harness work.

Ideal wall time = max(longest chain of model calls, total calls / concurrency) × delay: the
longest conversation cannot finish faster than its own calls, and N slots cannot serve more than
N calls per delay. Aim: ≤ 1.2× ideal at concurrency 16, harness CPU < 1 ms per step.

    .venv/bin/python bench/harness_overhead.py [--delay-ms 50] [--trials 4]
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchrig.harness.client import ChatClient
from benchrig.harness.runner import run_suite
from benchrig.harness.sink import MemorySink
from benchrig.harness.suites import load_suite
from benchrig.harness.testing import Reply, answer, scripted_server, tool_call

CALLS_PER_EPISODE = 3  # two tool-call turns, then the answer


def serve(delay_s: float, ready: mp.Queue, stop: mp.Event) -> None:  # type: ignore[type-arg]
    def script(body: dict) -> Reply:  # type: ignore[type-arg]
        turn = sum(m["role"] == "assistant" for m in body["messages"])
        tool = body["tools"][0]["function"]["name"]
        reply = tool_call(tool, {}) if turn < CALLS_PER_EPISODE - 1 else answer("42")
        return Reply(reply.body, delay_s=delay_s)

    with scripted_server(script) as server:
        ready.put(server.base_url)
        stop.wait()


async def one_run(base_url: str, trials: int, concurrency: int) -> tuple[float, float, int]:
    suite = load_suite("agentic-v1")
    sink = MemorySink()
    async with ChatClient(base_url=base_url, model="bench") as client:
        cpu0, wall0 = time.process_time(), time.perf_counter()
        records = await run_suite(
            client=client, suite=suite, trials=trials, concurrency=concurrency, sink=sink
        )
        wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    assert all(r.model_calls == CALLS_PER_EPISODE for r in records), "unexpected conversation"
    return wall, cpu, sum(len(s) for s in sink.steps.values())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--delay-ms", type=float, default=50)
    parser.add_argument("--trials", type=int, default=4)
    args = parser.parse_args()
    delay = args.delay_ms / 1000
    ready: mp.Queue = mp.Queue()  # type: ignore[type-arg]
    stop = mp.Event()
    server = mp.Process(target=serve, args=(delay, ready, stop), daemon=True)
    server.start()
    base_url = ready.get(timeout=30)
    episodes = len(load_suite("agentic-v1").tasks) * args.trials
    total_calls = episodes * CALLS_PER_EPISODE
    print(f"agentic-v1 × {args.trials} trials = {episodes} episodes, {total_calls} model calls, "
          f"server delay {args.delay_ms:.0f} ms, cpu count {os.cpu_count()}")  # fmt: skip
    print(f"{'concurrency':>11} {'wall s':>8} {'ideal s':>8} {'ratio':>6} {'steps':>6} "
          f"{'cpu ms/step':>12}")  # fmt: skip
    try:
        for concurrency in (1, 16):
            wall, cpu, steps = asyncio.run(one_run(base_url, args.trials, concurrency))
            ideal = max(CALLS_PER_EPISODE, total_calls / concurrency) * delay
            print(f"{concurrency:>11} {wall:>8.3f} {ideal:>8.3f} {wall / ideal:>6.2f} {steps:>6} "
                  f"{cpu / steps * 1000:>12.3f}")  # fmt: skip
    finally:
        stop.set()
        server.join(timeout=5)


if __name__ == "__main__":
    main()
