"""``so101-mjx eval POLICY``: a policy's episodes in the jitted, batched env on backend ``mjx`` and/or ``c``.

``POLICY`` is a checkpoint (run, ``checkpoints/`` or step directory: Brax's own deterministic
inference function), an exported ``.onnx`` / ``.npz`` (its weights rebuilt as a JAX MLP, so an ONNX
policy runs inside jit on any backend) or a pixel student (its flax network on the frames its env
renders: backend ``c``, or ``mjx`` with MuJoCo Warp), loaded by :func:`so101_mjx.training.policies.load`. Every
episode is one vmapped world of :func:`so101_mjx.envs.rollout.run_episodes` (stopping once all are done), in the
policy's own env config; episode ``i`` starts from the same state on every backend (one PRNG
stream from ``--seed``), so ``--backend mjx,c`` also reports the per-episode outcome agreement.
Float32 unless ``--x64``. The policy is checked as by ``so101-mjx replay`` (complete, finite
network; its env unless ``--force``).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import jax
import numpy as np
from jax import Array

from so101_mjx import _progress
from so101_mjx._precision import x64 as x64_precision
from so101_mjx.envs import make
from so101_mjx.envs.base import asdict
from so101_mjx.envs.rollout import run_episodes
from so101_mjx.errors import InputError, ParameterError
from so101_mjx.render import visual_randomization as vr
from so101_mjx.sim import servo
from so101_mjx.training import policies


def evaluate(
    path: str | Path, env: str | None = None, backends: tuple[str, ...] = ("c",), episodes: int = 100,
    seed: int = 0, x64: bool = False, force: bool = False, servo_model: Any = None, visual: Any = None,
    physics_dt: float | None = None,
) -> dict[str, Any]:
    """Run ``episodes`` episodes per backend (under ``servo_model``, a
    :class:`~so101_mjx.sim.servo.ServoModel` or its dict, when given, instead of the policy's own, or
    without one for ``"off"``; a pixel student's frames under ``visual``, a
    :class:`~so101_mjx.render.visual_randomization.VisualRandomization`, its dict or level name, instead of its
    own randomization, or none for ``"off"``; at ``physics_dt`` s per physics step instead of the policy's when
    given); returns (and prints) per backend ``success_rate``,
    ``mean_return``, ``mean_length``, per-episode ``success`` / ``returns`` / ``length`` lists and
    ``seconds`` (compile + run), and with two backends ``agreement`` (fraction of episodes with the
    same success)."""
    if episodes < 1:
        raise ParameterError(f"episodes must be >= 1, got {episodes}", "episodes")
    with x64_precision(x64):
        policy = policies.load(path)
        name, env_config = policy.env_for(env, force)
        if not policy.pixel:
            env_config = policies.without_cameras(env_config)  # it reads the flat observation: no frames rendered
        if visual is not None:
            if not policy.pixel:
                raise InputError("a visual randomization applies to a pixel policy's frames; a state policy "
                                 "renders none")
            env_config = {**env_config, "visual_randomization": None if visual == "off" else asdict(vr.parse(visual))}
        if physics_dt is not None:
            env_config = {**env_config, "physics_dt": physics_dt}
        if servo_model == "off":
            env_config = {**env_config, "servo_model": None}
        elif servo_model is not None:  # as a dict: the results are JSON
            env_config = {**env_config, "servo_model": asdict(servo.parse(servo_model))}
        result: dict[str, Any] = {"policy": str(path), "env": name, "env_config": env_config, "episodes": episodes,
                                  "seed": seed, "dtype": "float64" if x64 else "float32", "backends": {}}
        for backend in backends:
            result["backends"][backend] = run_policy(policy, name, env_config, backend, episodes, seed)
    if len(backends) >= 2:
        first, *others = (np.asarray(result["backends"][b]["success"]) for b in backends)
        result["agreement"] = float(np.mean(np.all([first == o for o in others], axis=0)))
    report(result)
    return result


def run_policy(policy: policies.Policy, name: str, env_config: dict[str, Any], backend: str, episodes: int,
               seed: int) -> dict[str, Any]:
    """The :func:`summary` of ``episodes`` episodes of ``policy`` in env ``name`` under ``env_config`` on
    ``backend``, episode ``i`` from the ``i``-th key of ``seed``'s stream (bad config fields: InputError)."""
    env = make(name, backend=backend, **env_config)
    act = policy.env_fn(env)
    policy.reset()
    start = time.perf_counter()
    _progress.phase(f"eval {backend}: compiling {episodes} episodes of up to {env.episode_length} steps")
    progress = _progress.bar(env.episode_length, f"eval {backend}", "step")

    def advanced(steps: int, ended: int) -> None:
        progress.update(steps - progress.n)
        progress.set_postfix_str(f"{ended}/{episodes} episodes ended")

    try:
        out = jax.device_get(run_episodes(env, act, jax.random.PRNGKey(seed), episodes, stop_when_done=True,
                                          setting=f"episodes {episodes}", progress=advanced,
                                          parameters=("episodes",)))
    finally:
        progress.close()
    return {**summary(out, time.perf_counter() - start), "physics_dt": env.config.physics_dt,
            "control_dt": env.config.control_dt}


def summary(out: dict[str, Array], seconds: float) -> dict[str, Any]:
    """Rates and per-episode outcomes of :func:`run_episodes`'s output."""
    success, returns, length = (np.asarray(out[k]) for k in ("success", "returns", "length"))
    return {"success_rate": float(success.mean()), "mean_return": float(returns.mean()),
            "mean_length": float(length.mean()),
            "seconds": seconds, "success": success.tolist(), "returns": returns.tolist(), "length": length.tolist()}


def report(result: dict[str, Any]) -> None:
    print(f"eval {policies.label(result['policy'])} on {result['env']} ({result['dtype']}, "
          f"{result['episodes']} episodes, seed {result['seed']})")
    for backend, r in result["backends"].items():
        print(f"  {backend:>3}: physics step {1000 * r['physics_dt']:.3g} ms, control period "
              f"{1000 * r['control_dt']:.3g} ms")
        print(f"  {backend:>3}: success rate {r['success_rate']:.3f} ({sum(r['success'])}/{len(r['success'])}), "
              f"mean return {r['mean_return']:.3f}, mean episode length {r['mean_length']:.1f}  ({r['seconds']:.0f} s)")
    if "agreement" in result:
        print(f"  per-episode outcome agreement {'/'.join(result['backends'])}: {result['agreement']:.3f}")
