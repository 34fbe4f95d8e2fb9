"""Checkpoints: Brax's Orbax PPO checkpoints plus ``run.json``, the metadata that rebuilds a policy.

Layout of a run directory (``--out``)::

    run.json                   env name and full config, preset, seed, obs/action sizes,
                               network sizes, normalizer setting, library version
    checkpoints/000000204800/  brax.training.agents.ppo.checkpoint format (Orbax params +
                               ppo_network_config.json) and a copy of run.json, written last:
                               a step directory without it is incomplete and ignored

``resolve`` accepts a run directory, its ``checkpoints/`` directory or one step directory.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from brax.training.agents.ppo import checkpoint as ppo_checkpoint

from train import networks
from train.policy import PolicyWeights

RUN_FILE = "run.json"
CHECKPOINTS = "checkpoints"


def write_run(path: Path, run: dict[str, Any]) -> None:
    path.mkdir(parents=True, exist_ok=True)
    (path / RUN_FILE).write_text(json.dumps(run, indent=2, sort_keys=True))


def read_run(path: Path) -> dict[str, Any]:
    """``run.json`` of a step directory; ValueError when absent or unreadable."""
    try:
        return json.loads((Path(path) / RUN_FILE).read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise ValueError(f"{path} is not a so101_mjx checkpoint (no readable {RUN_FILE}: {err})") from None


def steps(run_dir: Path) -> list[Path]:
    """Complete step directories under ``run_dir/checkpoints``, oldest first."""
    root = Path(run_dir) / CHECKPOINTS
    found = [p for p in root.glob("[0-9]" * 12) if (p / RUN_FILE).is_file()] if root.is_dir() else []
    return sorted(found, key=lambda p: int(p.name))


def resolve(path: str | Path) -> Path:
    """The step directory meant by ``path`` (latest step for a run or checkpoints directory)."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"checkpoint not found: {path}")
    if (path / RUN_FILE).is_file() and path.parent.name == CHECKPOINTS:
        return path
    found = steps(path.parent if path.name == CHECKPOINTS else path)
    if not found:
        raise ValueError(f"no complete checkpoint under {path} (expected {CHECKPOINTS}/<step>/{RUN_FILE})")
    return found[-1]


def save(run_dir: Path, step: int, params: Any, run: dict[str, Any]) -> Path:
    """Write step ``step``'s params ``(normalizer, policy, value)`` and its run.json."""
    factory = networks.network_factory(**run["network"])
    config = ppo_checkpoint.network_config(run["obs_size"], run["action_size"], run["normalize_observations"], factory)
    root = Path(run_dir).absolute() / CHECKPOINTS  # Orbax wants absolute paths
    ppo_checkpoint.save(root, step, params, config)
    path = root / f"{step:012d}"
    write_run(path, {**run, "step": step})
    return path


def load(path: str | Path) -> tuple[dict[str, Any], Any]:
    """``(run, params)`` of the checkpoint meant by ``path`` (see :func:`resolve`)."""
    step_dir = resolve(path)
    run = read_run(step_dir)
    return run, ppo_checkpoint.load(step_dir.absolute())


def policy_weights(run: dict[str, Any], params: Any) -> PolicyWeights:
    return PolicyWeights.from_params(params, run["normalize_observations"], run["network"]["activation"])


def inference_fn(run: dict[str, Any], params: Any):
    """Brax's deterministic policy for a loaded checkpoint: obs -> env action."""
    factory = networks.network_factory(**run["network"])
    return networks.inference_fn(factory, run["obs_size"], run["action_size"], run["normalize_observations"], params)
