"""The functional env behind the gym envs and its jitted functions, built once per config.

A gym env steps one world of a functional env (:mod:`so101_mjx.envs`) on backend ``c``. Building
that env and compiling its reset and step costs seconds; gym envs with the same task, config,
scene file and backend options (``gym.vector`` workers in one process, a test file's envs) share
one :class:`Compiled`, so only the first pays. What is shared is read-only: the functional env
(its configs, its MuJoCo model for the physics) and the jitted functions. Each gym env keeps its
own state, ``MjData``, renderer and copy of the model.
"""

from __future__ import annotations

import collections
import dataclasses
import os
import threading
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from so101_mjx.envs.base import SO101Env
from so101_mjx.envs.registry import split_options
from so101_mjx.errors import InputError
from so101_mjx.robot.scenes import load_model
from so101_mjx.sim.state import State

MAX_SHARED = 8  # configs kept compiled at once (least recently built dropped first)


@dataclasses.dataclass(frozen=True)
class Compiled:
    """A functional env on backend ``c`` and its jitted functions (see :class:`SO101GymEnv`)."""

    env: SO101Env
    reset: Callable  # (key) -> State
    reset_to: Callable  # (key, **fixed) -> State
    # (state, action (4,), scale, bounds (2, 3)) -> State: the reference's IK-target update, then a step
    control_step: Callable
    joint_step: Callable | None  # (state, action (6,)) -> State in joint mode, else None
    ik_point: Callable  # (physics) -> (3,) m
    agent_pos: Callable  # (physics) -> (14,)
    observe: Callable  # (physics, info) -> observation
    evaluate: Callable  # (physics, info) -> (success, reward)


_shared: collections.OrderedDict[Hashable, Compiled] = collections.OrderedDict()
_lock = threading.Lock()


def compiled(task: type[SO101Env], xml_path: str | Path | None, options: dict[str, Any]) -> Compiled:
    """The shared :class:`Compiled` of ``task`` with config overrides and backend options ``options``
    (unknown names: InputError) on its scene, or on the MJCF at ``xml_path`` (same joints, sites and
    named geoms; a file changed on disk is a new entry)."""
    cfg, physics_kwargs = split_options(task, "c", options)
    if xml_path is not None and not isinstance(xml_path, (str, Path)):
        raise InputError(f"xml_path must be None or the path of an MJCF file, got {xml_path!r}")
    key = _key(task, cfg, xml_path, physics_kwargs)
    with _lock:
        if key is not None and key in _shared:
            _shared.move_to_end(key)
            return _shared[key]
        model = None if xml_path is None else load_model(Path(xml_path), jaw_pads=cfg.jaw_pads)
        built = _build(task(cfg, "c", model=model, **physics_kwargs))
        if key is not None:
            _shared[key] = built
            while len(_shared) > MAX_SHARED:
                _shared.popitem(last=False)
        return built


def _key(task: type[SO101Env], cfg: Any, xml_path: str | Path | None,
         physics_kwargs: dict[str, Any]) -> Hashable | None:
    """The cache key, or None (not shared) when a part of it is unhashable or the file is unreadable."""
    scene = None
    if xml_path is not None:
        try:
            stat = os.stat(xml_path)
        except OSError:
            return None  # load_model names the missing file
        scene = (str(Path(xml_path).resolve()), stat.st_mtime_ns, stat.st_size)
    key = (task, cfg, scene, tuple(sorted(physics_kwargs.items())))
    try:
        hash(key)
    except TypeError:
        return None
    return key


def _build(env: SO101Env) -> Compiled:
    arm = env.arm
    return Compiled(
        env=env,
        reset=jax.jit(env.reset),
        reset_to=jax.jit(env.reset_to),
        control_step=jax.jit(lambda state, action, scale, bounds: control_step(env, state, action, scale, bounds)),
        joint_step=jax.jit(env.step) if arm.joint_mode is not None else None,
        ik_point=jax.jit(arm.ik_point),
        agent_pos=jax.jit(arm.agent_pos),
        observe=jax.jit(env.observation),
        evaluate=jax.jit(lambda physics, info: success_and_reward(env, physics, info)),
    )


def control_step(env: SO101Env, state: State, action: jax.Array, scale: jax.Array, bounds: jax.Array) -> State:
    """The reference's IK-target update (``scale`` m per unit action, clipped to ``bounds`` (2, 3) m), then
    the functional step with that target held: IK, gripper, physics, task bookkeeping.

    NaN/inf deltas count as zero and reach the functional step as they are, which counts them
    in ``nonfinite_actions``; a non-finite grasp keeps the jaw command there."""
    info, finite = state.info, jnp.isfinite(action[:3])
    target, is_zero = env.arm.next_ik_target(state.physics, info, action[:3], scale, bounds)
    held = state.replace(info=info.replace(ik_target=target, last_action_zero=jnp.ones((), bool)))
    out = env.step(held, jnp.concatenate([jnp.where(finite, 0.0, action[:3]), action[3:]]))
    return out.replace(info=out.info.replace(last_action_zero=is_zero))


def reset_draws(env: SO101Env, np_random: np.random.Generator) -> tuple[int, dict[str, Any] | None]:
    """What a gym env's ``reset`` draws from its ``np_random``, in order: a task mirroring the reference env first
    draws the reference's :meth:`~so101_mjx.envs.base.SO101Env.reset_to` quantities (else None), then the seed in
    [0, 2**31 - 1) of the JAX key that draws the rest. Every reset of a gym env or of a vector env's world."""
    fixed = env.reference_initial(np_random) if env.reference_env else None
    return int(np_random.integers(0, 2**31 - 1)), fixed


def success_and_reward(env: SO101Env, physics, info) -> tuple[jax.Array, jax.Array]:
    """The task's success () bool and reward () at a state."""
    success = env.success(physics, info)
    terms = env.reward_terms(physics, info, success)
    dtype = physics.qpos.dtype
    return success, sum((env.reward_scales[k] * v.astype(dtype) for k, v in terms.items()), jnp.zeros((), dtype))
