"""The latency statistics: the U test against hand-counted p-values, and the verdict on synthetic samples."""
import math
import random

import pytest

from adaln_bench.datamodel.stats import (
    DEFAULT_ALPHA,
    DEFAULT_THRESHOLD,
    StatVerdict,
    latency_verdict,
    mann_whitney_u,
    median,
)


def _samples(seed: int, centre: float, rel_sd: float, n: int) -> list[float]:
    rng = random.Random(seed)
    return [rng.gauss(centre, centre * rel_sd) for _ in range(n)]


# --- the U test -----------------------------------------------------------------------------------


def test_exact_p_of_two_separated_groups_of_four_is_two_in_seventy():
    # Of the C(8, 4) = 70 equally likely orderings, only "all x below" and "all x above" are this extreme.
    test = mann_whitney_u([1, 2, 3, 4], [5, 6, 7, 8])
    assert test.exact and test.u == 0
    assert test.p_value == pytest.approx(2 / 70)


def test_exact_p_with_one_inversion_counts_four_orderings():
    # U = 1 (only 5 > 4); orderings with U ≤ 1: U = 0 and U = 1 (one each), doubled for two sides.
    test = mann_whitney_u([1, 2, 3, 5], [4, 6, 7, 8])
    assert test.u == 1
    assert test.p_value == pytest.approx(4 / 70)


def test_normal_approximation_with_ties_matches_the_hand_computation():
    # Pooled [1, 2, 2, 2, 3, 4]: mid-ranks 1, 3, 3, 3, 5, 6; x's rank sum 7, so U = 7 - 3·4/2 = 1.
    # One tie of 3: variance = 3·3/12 · (7 - (27 - 3)/(6·5)) = 0.75 · 6.2 = 4.65.
    # z = (|1 - 4.5| - 0.5) / √4.65 = 1.39122; p = erfc(z/√2) = 0.16420.
    test = mann_whitney_u([1, 2, 2], [2, 3, 4])
    assert not test.exact and test.u == 1
    assert test.p_value == pytest.approx(0.16420, abs=5e-5)


def test_p_value_is_symmetric_and_one_for_identical_samples():
    a, b = _samples(1, 100, 0.02, 40), _samples(2, 103, 0.02, 50)
    assert mann_whitney_u(a, b).p_value == pytest.approx(mann_whitney_u(b, a).p_value)
    assert mann_whitney_u([5.0] * 20, [5.0] * 20).p_value == 1.0


def test_agrees_with_scipy_where_scipy_is_installed():
    stats = pytest.importorskip("scipy.stats")
    a, b = _samples(3, 100, 0.05, 150), _samples(4, 102, 0.05, 170)
    ours = mann_whitney_u(a, b)
    theirs = stats.mannwhitneyu(a, b, alternative="two-sided", method="asymptotic", use_continuity=True)
    assert ours.u == pytest.approx(theirs.statistic)
    assert ours.p_value == pytest.approx(theirs.pvalue, rel=1e-9)
    small = mann_whitney_u([3.1, 1.2, 5.5, 2.0, 4.4], [6.0, 2.5, 7.7, 8.1, 3.9, 9.2])
    exact = stats.mannwhitneyu([3.1, 1.2, 5.5, 2.0, 4.4], [6.0, 2.5, 7.7, 8.1, 3.9, 9.2],
                               alternative="two-sided", method="exact")
    assert small.exact and small.p_value == pytest.approx(exact.pvalue)


def test_median_of_even_and_odd_counts():
    assert median([3, 1, 2]) == 2
    assert median([4, 1, 3, 2]) == 2.5
    with pytest.raises(ValueError):
        median([])


# --- the verdict ----------------------------------------------------------------------------------


def test_defaults_are_asvs_alpha_and_a_threshold_at_most_ten_percent():
    assert DEFAULT_ALPHA == 0.002
    assert 0 < DEFAULT_THRESHOLD <= 0.10


@pytest.mark.parametrize("seed", range(20))
def test_same_distribution_is_same(seed):
    old, new = _samples(2 * seed, 150.0, 0.01, 300), _samples(2 * seed + 1, 150.0, 0.01, 300)
    result = latency_verdict(old, new)
    assert result.verdict is StatVerdict.SAME
    assert result.warning is None


def test_a_fifteen_percent_shift_with_tight_samples_is_worse_and_the_reverse_better():
    old, new = _samples(10, 150.0, 0.005, 300), _samples(11, 172.5, 0.005, 300)
    worse = latency_verdict(old, new)
    assert worse.verdict is StatVerdict.WORSE
    assert worse.ratio == pytest.approx(1.15, abs=0.005)
    assert worse.p_value < 1e-50 and worse.p_beyond < 1e-50
    assert latency_verdict(new, old).verdict is StatVerdict.BETTER


def test_a_three_percent_shift_inside_the_noise_is_same_or_ambiguous():
    # Host-inclusive noise: 8 % spread, a 3 % shift of the centre.
    for seed in range(10):
        old, new = _samples(100 + seed, 150.0, 0.08, 100), _samples(200 + seed, 154.5, 0.08, 100)
        assert latency_verdict(old, new).verdict in (StatVerdict.SAME, StatVerdict.AMBIGUOUS)


def test_a_real_small_shift_pushed_past_the_threshold_by_noise_is_not_worse():
    # A true 3 % shift under 8 % noise: with these seeds the sample medians differ by 5.7 %, past the 5 %
    # threshold, and the shift itself is significant (p ≈ 3e-6); that it exceeds 5 % is not.
    old, new = _samples(100, 150.0, 0.08, 100), _samples(200, 154.5, 0.08, 100)
    result = latency_verdict(old, new, threshold=0.05)
    assert result.ratio > 1.05 and result.p_value < DEFAULT_ALPHA
    assert result.p_beyond > DEFAULT_ALPHA
    assert result.verdict is StatVerdict.AMBIGUOUS


def test_beyond_the_threshold_but_not_significant_is_ambiguous():
    # 12 % apart on the medians, but the spread is 30 % and there are only 10 samples a side.
    old = [100, 140, 70, 125, 95, 160, 80, 110, 130, 60]
    new = [112, 150, 85, 138, 100, 175, 90, 125, 150, 75]
    result = latency_verdict(old, new, threshold=0.05)
    assert result.ratio > 1.05
    assert result.p_value > 0.1
    assert result.verdict is StatVerdict.AMBIGUOUS


def test_three_samples_a_side_can_never_be_worse_and_warn():
    result = latency_verdict([100.0, 100.1, 100.2], [150.0, 150.1, 150.2])
    assert result.p_value == pytest.approx(0.1)  # 2 of C(6, 3) = 20 orderings
    assert result.verdict is StatVerdict.AMBIGUOUS
    assert "fewer than 9" in result.warning and "OLD has 3" in result.warning


def test_a_significant_shift_within_the_threshold_is_same():
    old, new = _samples(30, 150.0, 0.002, 300), _samples(31, 153.0, 0.002, 300)  # 2 %, p tiny
    result = latency_verdict(old, new, threshold=0.05)
    assert result.p_value < 1e-30
    assert result.verdict is StatVerdict.SAME


def test_describe_gives_change_p_and_counts():
    text = latency_verdict([100.0] * 9 + [101.0], [120.0] * 9 + [121.0]).describe()
    assert text.startswith("+19.8 %") or text.startswith("+20.0 %")
    assert "10 vs 10 samples" in text


def test_bad_arguments_raise():
    with pytest.raises(ValueError):
        latency_verdict([1.0], [1.0], threshold=-0.1)
    with pytest.raises(ValueError):
        latency_verdict([1.0], [1.0], alpha=0.0)
    with pytest.raises(ValueError):
        mann_whitney_u([], [1.0])
    assert not math.isnan(latency_verdict([1.0, 2.0], [1.0, 2.0]).p_value)
