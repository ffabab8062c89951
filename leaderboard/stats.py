"""Uncertainty for leaderboards: pure functions, no Django, tested against known values.

- Wilson score interval for a success rate (better than the normal approximation at 13/15).
- Bootstrap over tasks for the Agentic Score: tasks are the sampling unit (a suite is a sample of
  tasks), so we resample tasks with replacement and recompute the episode-weighted ratio
  Σ score / Σ episodes from per-task sums — never a Python loop over episodes.
- pass^k: the unbiased estimator C(c, k) / C(n, k) per task (n trials, c passes), averaged over
  tasks — the chance that k fresh trials of a task all pass.
- McNemar's exact test on paired outcomes: a two-sided binomial test on the discordant pairs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

Z95 = 1.959963984540054  # the 97.5th percentile of the standard normal
BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 20260
Interval = tuple[float, float]


def wilson(successes: int, n: int, *, z: float = Z95) -> Interval | None:
    """The Wilson score interval for successes/n; None when there is nothing to estimate."""
    if n <= 0:
        return None
    if not 0 <= successes <= n:
        raise ValueError(f"successes must lie in [0, {n}], got {successes}")
    p = successes / n
    z2 = z * z
    denom = 1 + z2 / n
    centre = (p + z2 / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def _resample_counts(n_tasks: int, resamples: int, seed: int) -> np.ndarray:
    """How often each task is drawn in each resample: a (resamples, n_tasks) count matrix."""
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, n_tasks, size=(resamples, n_tasks))
    flat = draws + np.arange(resamples)[:, None] * n_tasks
    return np.bincount(flat.ravel(), minlength=resamples * n_tasks).reshape(resamples, n_tasks)


def bootstrap_ratio(
    numerators: Sequence[Sequence[float]],
    denominators: Sequence[Sequence[float]],
    *,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
    level: float = 0.95,
) -> list[Interval | None]:
    """Percentile intervals of Σ numerator / Σ denominator with tasks resampled, one per row.

    ``numerators[r][t]`` is row r's summed per-episode score on task t, ``denominators[r][t]``
    its number of scored episodes on that task (0 where it has none). All rows share one set of
    resamples (a fixed seed), so the intervals are reproducible and rows are compared on the same
    draws of tasks. A row with no scored episode gets None.
    """
    num = np.asarray(numerators, dtype=float)
    den = np.asarray(denominators, dtype=float)
    if num.shape != den.shape:
        raise ValueError(f"numerators {num.shape} and denominators {den.shape} differ in shape")
    if num.size == 0:
        return [None] * len(num)
    counts = _resample_counts(num.shape[1], resamples, seed).astype(float).T  # (tasks, B)
    with np.errstate(invalid="ignore", divide="ignore"):
        boot = (num @ counts) / (den @ counts)  # (rows, B); 0/0 → nan: a draw of empty tasks
    tail = (1 - level) / 2 * 100
    out: list[Interval | None] = []
    for r in range(num.shape[0]):
        row = boot[r][~np.isnan(boot[r])]
        if den[r].sum() == 0 or row.size == 0:
            out.append(None)
            continue
        lo, hi = np.percentile(row, [tail, 100 - tail])
        out.append((float(lo), float(hi)))
    return out


def pass_hat_k(per_task: Sequence[tuple[int, int]], k: int) -> float | None:
    """Mean over tasks of C(c, k) / C(n, k), for tasks with at least k trials (n, c = trials,
    passes). None when no task has k trials."""
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    values = [math.comb(c, k) / math.comb(n, k) for n, c in per_task if n >= k]
    return sum(values) / len(values) if values else None


def mcnemar_exact(a_only: int, b_only: int) -> float:
    """Two-sided exact McNemar p-value from the discordant pairs (a passed and b failed, and the
    reverse): under no difference each discordant pair goes either way with probability ½."""
    n = a_only + b_only
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(a_only, b_only) + 1)) / 2**n
    return min(1.0, 2 * tail)


def overlaps(a: Interval | None, b: Interval | None) -> bool:
    return a is not None and b is not None and a[0] <= b[1] and b[0] <= a[1]


def tied_with_previous(intervals: Sequence[Interval | None]) -> list[bool]:
    """For rows in ranked order: whether each row's interval overlaps the row above it."""
    return [i > 0 and overlaps(intervals[i - 1], intervals[i]) for i in range(len(intervals))]


def p_value_words(p: float, *, discordant: int) -> str:
    """A p-value said in plain words, for people who publish tables."""
    if discordant == 0:
        return "No task went differently between the two runs: no evidence of a difference."
    shown = f"p = {p:.3f}" if p >= 0.001 else "p < 0.001"
    if p < 0.01:
        verdict = "very unlikely to be chance"
    elif p < 0.05:
        verdict = "unlikely to be chance"
    elif p < 0.2:
        verdict = "could be chance; more tasks or trials would tell"
    else:
        verdict = "could well be chance — treat success as a tie"
    pairs = "pair" if discordant == 1 else "pairs"
    return f"The success difference is {verdict} ({shown}, {discordant} discordant {pairs})."
