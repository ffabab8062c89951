"""The statistics module against known values, without a database."""

from __future__ import annotations

import math

import numpy as np
import pytest

from leaderboard.stats import (
    Z95,
    bootstrap_ratio,
    mcnemar_exact,
    p_value_words,
    pass_hat_k,
    tied_with_previous,
    wilson,
)


def test_wilson_13_of_15_matches_the_formula_and_the_published_values() -> None:
    n, x, z = 15, 13, Z95
    p = x / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    lo, hi = wilson(13, 15)
    assert (lo, hi) == pytest.approx((centre - half, centre + half), abs=1e-12)
    assert (round(lo, 3), round(hi, 3)) == (0.621, 0.963)


def test_wilson_edges() -> None:
    lo, hi = wilson(15, 15)
    assert hi == 1.0 and lo == pytest.approx(0.796, abs=1e-3)
    lo, hi = wilson(0, 15)
    assert lo == 0.0 and hi == pytest.approx(0.204, abs=1e-3)
    assert wilson(0, 0) is None
    with pytest.raises(ValueError, match="successes must lie in"):
        wilson(16, 15)


def test_bootstrap_is_reproducible_and_matches_a_direct_resampling() -> None:
    # 15 tasks, one episode each (per-task sums of per-episode scores).
    scores = [
        [
            100.0,
            96.0,
            100.0,
            92.5,
            100.0,
            85.0,
            100.0,
            97.0,
            100.0,
            35.0,
            100.0,
            91.0,
            100.0,
            42.5,
            100.0,
        ]
    ]
    ones = [[1.0] * 15]
    first = bootstrap_ratio(scores, ones, resamples=2000, seed=7)
    assert first == bootstrap_ratio(scores, ones, resamples=2000, seed=7)
    assert first != bootstrap_ratio(scores, ones, resamples=2000, seed=8)

    # The same draws, resampled the slow, obvious way.
    rng = np.random.default_rng(7)
    draws = rng.integers(0, 15, size=(2000, 15))
    means = sorted(sum(scores[0][t] for t in row) / 15 for row in draws)
    expected = np.percentile(means, [2.5, 97.5])
    lo, hi = first[0]
    assert (lo, hi) == pytest.approx(tuple(expected), abs=1e-9)
    point = sum(scores[0]) / 15
    assert lo < point < hi and hi <= 100.0


def test_bootstrap_weights_tasks_by_their_episodes_and_handles_empty_rows() -> None:
    # Task 0 has 3 scored episodes summing 300, task 1 one episode of 0: every resample that
    # draws both gives (300·a + 0·b) / (3a + b) — never the unweighted task mean.
    out = bootstrap_ratio([[300.0, 0.0], [0.0, 0.0]], [[3, 1], [0, 0]], resamples=500, seed=1)
    lo, hi = out[0]
    assert 0.0 <= lo <= 75.0 <= hi <= 100.0
    assert out[1] is None
    same = bootstrap_ratio([[80.0] * 4], [[1] * 4], resamples=200)
    assert same[0] == pytest.approx((80.0, 80.0))
    with pytest.raises(ValueError, match="differ in shape"):
        bootstrap_ratio([[1.0, 2.0]], [[1.0]])


def test_pass_hat_k_by_hand() -> None:
    # Task A: 4 trials, 3 passes → pass^2 = C(3,2)/C(4,2) = 3/6 = 0.5
    # Task B: 4 trials, 4 passes → 1.0;  task C: 4 trials, 1 pass → C(1,2) = 0 → 0.0
    assert pass_hat_k([(4, 3), (4, 4), (4, 1)], 2) == pytest.approx((0.5 + 1.0 + 0.0) / 3)
    # pass^1 is the plain success rate averaged over tasks; pass^3 of task A = 1/4.
    assert pass_hat_k([(4, 3)], 1) == pytest.approx(0.75)
    assert pass_hat_k([(4, 3)], 3) == pytest.approx(0.25)
    # Tasks with fewer than k trials are left out; none left → None.
    assert pass_hat_k([(4, 2), (1, 1)], 2) == pytest.approx(1 / 6)
    assert pass_hat_k([(1, 1)], 2) is None
    with pytest.raises(ValueError, match="k must be at least 1"):
        pass_hat_k([(2, 1)], 0)


def test_mcnemar_exact_by_hand() -> None:
    # 2 discordant pairs, both one way: p = 2 · (1/2)^2 = 0.5
    assert mcnemar_exact(2, 0) == pytest.approx(0.5)
    # 8 vs 1: p = 2 · (C(9,0) + C(9,1)) / 2^9 = 2 · 10 / 512
    assert mcnemar_exact(8, 1) == pytest.approx(20 / 512)
    assert mcnemar_exact(0, 0) == 1.0
    assert mcnemar_exact(3, 3) == 1.0


def test_ties_follow_interval_overlap() -> None:
    intervals = [(0.9, 1.0), (0.85, 0.95), (0.5, 0.6), None, (0.1, 0.2)]
    assert tied_with_previous(intervals) == [False, True, False, False, False]


def test_p_value_in_plain_words() -> None:
    assert "could well be chance" in p_value_words(0.5, discordant=2)
    assert "p = 0.039" in p_value_words(20 / 512, discordant=9)
    assert "unlikely to be chance" in p_value_words(20 / 512, discordant=9)
    assert "no evidence" in p_value_words(1.0, discordant=0)
