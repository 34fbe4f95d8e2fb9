"""How much error in its privileged block position a state teacher tolerates, for docs/pixels.md: its success when
the ``block_pos`` it observes is off by a per-episode bias, or by fresh noise each step, of per-axis standard
deviation sigma (what an estimator student hands it when its estimate errs).

    python docs/_tools/teacher_tolerance.py TEACHER/policy.onnx [--episodes 128] [--servo-model JSON]

The episodes are the same for every row (keys from seed 1000); each episode's bias is drawn from its first
observation.
"""

from __future__ import annotations

import argparse
import json
import time

import jax
import jax.numpy as jnp
import numpy as np

from so101_mjx.envs import make
from so101_mjx.envs.rollout import _episode_fns
from so101_mjx.training import policies

ROWS = ((0.0, 0.0), (0.004, 0.0), (0.0085, 0.0), (0.012, 0.0), (0.0, 0.0085))  # (bias, step noise) sigma, m


def success(policy: policies.Policy, env, episodes: int, bias: float, noise: float) -> float:
    """The teacher's success over ``episodes`` episodes with its ``block_pos`` moved by ``bias`` and ``noise``."""
    at = env.agent_pos_size

    def init(state):
        bits = jax.lax.bitcast_convert_type(state.obs[at:at + 2].astype(jnp.float32), jnp.int32)
        key = jax.random.fold_in(jax.random.fold_in(jax.random.PRNGKey(7), bits[0]), bits[1])
        return bias * jax.random.normal(key, (3,), state.obs.dtype)

    def act(offset, state, key):
        moved = offset + noise * jax.random.normal(key, (3,), state.obs.dtype)
        return offset, policy.jax_fn(state.obs.at[at:at + 3].add(moved))

    start, body = _episode_fns(env, init, act)
    keys = jax.random.split(jax.random.PRNGKey(1000), episodes)
    carry, step_keys = jax.jit(jax.vmap(start, in_axes=(0, None)), static_argnums=1)(keys, env.episode_length)
    carry = jax.jit(jax.vmap(lambda c, k: jax.lax.scan(body, c, k)[0]))(carry, step_keys)
    return float(np.mean(np.asarray(carry.outcome()["success"])))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("teacher")
    parser.add_argument("--episodes", type=int, default=128)
    parser.add_argument("--servo-model", type=json.loads, default=None, help="a ServoModel's fields (JSON)")
    args = parser.parse_args()
    policy = policies.load(args.teacher)
    name, config = policy.env_for()
    config = policies.without_cameras(config)
    if args.servo_model is not None:
        config = {**config, "servo_model": args.servo_model}
    env = make(name, backend="c", **config)
    for bias, noise in ROWS:
        start = time.perf_counter()
        rate = success(policy, env, args.episodes, bias, noise)
        print(f"bias sigma {1000 * bias:.1f} mm, step noise sigma {1000 * noise:.1f} mm: success {rate:.3f} "
              f"({time.perf_counter() - start:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
