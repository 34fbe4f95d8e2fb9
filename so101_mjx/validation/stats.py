"""Success rates with their uncertainty, and paired comparisons of two policies on the same episodes.

- :func:`wilson`: the Wilson score interval of a binomial proportion (Wilson 1927), which keeps its
  coverage near 0 and 1, where the normal approximation's interval collapses to a point;
- :func:`mcnemar`: McNemar's exact test for paired outcomes (two policies, the same seeded episodes):
  only the discordant episodes count, and under the null hypothesis each is equally likely to favour
  either policy, so the p-value is a two-sided binomial tail with probability 1/2.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

Z95 = 1.959963984540054  # the standard normal's 97.5 % quantile: a two-sided 95 % interval


def wilson(successes: int, trials: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval ``(low, high)`` of ``successes`` out of ``trials`` (``trials`` >= 1)."""
    if trials < 1 or not 0 <= successes <= trials:
        raise ValueError(f"wilson: need 0 <= successes <= trials and trials >= 1, got {successes}/{trials}")
    p, n, z2 = successes / trials, trials, z * z
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def mcnemar(first: Sequence[bool], second: Sequence[bool]) -> dict[str, float | int]:
    """McNemar's exact test on paired outcomes: ``only_first`` and ``only_second`` (the discordant
    episodes), the success difference ``second - first`` (a rate) and the two-sided ``p_value``."""
    if len(first) != len(second) or not len(first):
        raise ValueError(f"mcnemar: two outcome lists of one length >= 1 expected, got {len(first)} and {len(second)}")
    only_first = sum(bool(a) and not bool(b) for a, b in zip(first, second))
    only_second = sum(bool(b) and not bool(a) for a, b in zip(first, second))
    n, k = only_first + only_second, min(only_first, only_second)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2**n if n else 1.0
    return {"only_first": only_first, "only_second": only_second, "difference": (only_second - only_first) / len(first),
            "p_value": min(1.0, 2 * tail)}


def verdict(test: dict[str, float | int], alpha: float = 0.05) -> str:
    """One line on a :func:`mcnemar` result at level ``alpha``."""
    if test["only_first"] == test["only_second"] == 0:
        return "no difference: the two policies succeed on exactly the same episodes"
    better = "second" if test["only_second"] > test["only_first"] else "first"
    if test["p_value"] < alpha:
        return f"the {better} policy is better (McNemar p = {test['p_value']:.3g} < {alpha})"
    return f"no significant difference (McNemar p = {test['p_value']:.3g} >= {alpha})"
