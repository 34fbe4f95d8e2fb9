"""The success intervals and the paired test against values computed independently."""

import math

import pytest

from so101_mjx.validation.stats import mcnemar, verdict, wilson


@pytest.mark.parametrize("k, n, low, high", [
    # Wilson 95 % intervals as published (Newcombe 1998, Table I, method 3; to 4 decimals)
    (81, 263, 0.2553, 0.3662),
    (15, 148, 0.0624, 0.1605),
    (0, 20, 0.0, 0.1611),
    (1, 29, 0.0061, 0.1718),
    (0, 10, 0.0, 0.2775),
    (10, 10, 0.7225, 1.0),
])
def test_wilson_matches_published_intervals(k, n, low, high):
    got = wilson(k, n)
    assert got == pytest.approx((low, high), abs=5e-5)


def test_wilson_contains_the_rate_and_narrows_with_trials():
    for k, n in [(3, 7), (50, 100), (500, 1000)]:
        low, high = wilson(k, n)
        assert low < k / n < high
    assert wilson(500, 1000)[1] - wilson(500, 1000)[0] < wilson(50, 100)[1] - wilson(50, 100)[0]
    with pytest.raises(ValueError, match="successes <= trials"):
        wilson(5, 4)


def test_mcnemar_is_the_exact_binomial_tail():
    first = [True] * 10 + [False] * 5 + [True] * 2
    second = [True] * 10 + [True] * 5 + [False] * 2
    test = mcnemar(first, second)
    # 7 discordant episodes, 2 of them for the first: p = 2 * P(X <= 2), X ~ Bin(7, 1/2)
    assert (test["only_first"], test["only_second"]) == (2, 5)
    assert test["p_value"] == pytest.approx(2 * (1 + 7 + 21) / 128)
    assert test["difference"] == pytest.approx(3 / 17)
    assert "no significant difference" in verdict(test)


def test_a_policy_against_itself_shows_no_difference():
    outcomes = [True, False, True, True]
    test = mcnemar(outcomes, outcomes)
    assert test["p_value"] == 1.0 and test["difference"] == 0
    assert verdict(test).startswith("no difference")


def test_a_clear_difference_is_significant():
    test = mcnemar([False] * 20, [True] * 20)
    assert test["p_value"] == pytest.approx(2 / 2**20) and math.isclose(test["difference"], 1.0)
    assert "second policy is better" in verdict(test)
