"""Per-episode and aggregated feature statistics of a LeRobotDataset v3.0 (``meta/stats.json``).

They follow lerobot's ``compute_episode_stats`` / ``aggregate_stats``: per episode min, max, mean, population std,
count and the histogram (5,000 bins) quantiles; images per channel over sampled frames, scaled
to [0, 1], shape (3, 1, 1). Across episodes mean and std are count-weighted (exact), and the
quantiles a conservative envelope: the episodes' minimum up to q50, their maximum above (lerobot
main since its #3804; releases up to 0.6.1 average them, weighted by count, which puts the q01 of
``index`` near the middle). Computed here in float64 (lerobot: float32).
"""

from __future__ import annotations

import numpy as np

QUANTILES = (0.01, 0.10, 0.50, 0.90, 0.99)
QUANTILE_KEYS = tuple(f"q{round(q * 100):02d}" for q in QUANTILES)
QUANTILE_BINS = 5000


def _histogram_quantile(counts: np.ndarray, edges: np.ndarray, target: float) -> float:
    """lerobot's quantile from a histogram: linear within the bin where the cumulative count reaches ``target``."""
    cum = np.cumsum(counts)
    k = int(np.searchsorted(cum, target))
    if k == 0:
        return float(edges[0])
    if k >= len(cum):
        return float(edges[-1])
    inside = cum[k] - cum[k - 1]
    return float(edges[k]) if inside == 0 else float(edges[k]
                                                     + (target - cum[k - 1]) / inside * (edges[k + 1] - edges[k]))


def feature_stats(values: np.ndarray) -> dict[str, np.ndarray]:
    """Stats of samples ``values`` (N, D) per column: min/max/mean/std/q.. (D,), count (1,)."""
    x = np.asarray(values, np.float64).reshape(len(values), -1)
    n = len(x)
    stats = {"min": x.min(0), "max": x.max(0), "mean": x.mean(0), "std": x.std(0), "count": np.array([n])}
    if n < 2:  # too few samples for a histogram: lerobot sets every quantile to the mean
        return stats | {k: stats["mean"].copy() for k in QUANTILE_KEYS}
    quantiles = np.empty((len(QUANTILES), x.shape[1]))
    for j in range(x.shape[1]):
        edges = np.linspace(stats["min"][j] - 1e-10, stats["max"][j] + 1e-10, QUANTILE_BINS + 1)
        try:  # uniform bins: numpy's O(n) path, same counts as the edges
            counts, _ = np.histogram(x[:, j], QUANTILE_BINS, (edges[0], edges[-1]))
        except ValueError:  # a range narrower than 5,000 float steps (a constant column of large values)
            counts, _ = np.histogram(x[:, j], edges)
        quantiles[:, j] = [_histogram_quantile(counts, edges, q * n) for q in QUANTILES]
    return stats | dict(zip(QUANTILE_KEYS, quantiles))


def sampled_frames(length: int) -> np.ndarray:
    """Frame indices lerobot samples for image stats: all below 100 frames, then ~length**0.75."""
    count = max(min(length, 100), min(int(length**0.75), 10_000))
    return np.round(np.linspace(0, length - 1, count)).astype(int)


def image_stats(frames: np.ndarray) -> dict[str, np.ndarray]:
    """Per-channel stats (C, 1, 1) in [0, 1] of (T, H, W, C) uint8 frames (sampled, > 300 px downsampled)."""
    images = frames[sampled_frames(len(frames))]
    h, w = images.shape[1:3]
    if max(h, w) >= 300:
        step = int(w / 150) if w > h else int(h / 150)
        images = images[:, ::step, ::step]
    stats = feature_stats(images.reshape(-1, images.shape[-1]))
    return ({k: v if k == "count" else (v / 255.0).reshape(-1, 1, 1) for k, v in stats.items()}
            | {"count": np.array([len(images)])})


def aggregate_stats(episodes: list[dict[str, dict[str, np.ndarray]]]) -> dict[str, dict[str, np.ndarray]]:
    """Stats of several episodes together (lerobot's ``aggregate_stats``): exact min/max/mean/std,
    summed counts; quantiles q01..q50 the episodes' minimum, q90/q99 their maximum."""
    out = {}
    for key in episodes[0]:
        parts = [e[key] for e in episodes]
        counts = np.array([p["count"][0] for p in parts], np.float64)
        w = counts.reshape(-1, *[1] * np.ndim(parts[0]["mean"])) / counts.sum()
        mean = sum(wi * p["mean"] for wi, p in zip(w, parts))
        var = sum(wi * (p["std"] ** 2 + (p["mean"] - mean) ** 2) for wi, p in zip(w, parts))
        out[key] = {"min": np.min([p["min"] for p in parts], 0), "max": np.max([p["max"] for p in parts], 0),
                    "mean": mean, "std": np.sqrt(var), "count": np.array([int(counts.sum())])}
        out[key] |= {q: (np.min if int(q[1:]) <= 50 else np.max)([p[q] for p in parts], 0) for q in QUANTILE_KEYS}
    return out
