"""A task defined outside the package registers, makes, rolls out, trains through the CLI and gets a gym id."""

from __future__ import annotations

import dataclasses

import gymnasium
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import so101_mjx
from so101_mjx import cli
from so101_mjx.envs.base import SO101Env, as_qpos0, fixed_array
from so101_mjx.envs.config import ArmConfig
from so101_mjx.envs.rollout import run_episodes
from so101_mjx.errors import InputError

NAME = "SO101TestHover-v0"


@dataclasses.dataclass(frozen=True)
class HoverConfig(ArmConfig):
    action_scale: float = 0.05
    episode_length: int = 20


class Hover(SO101Env):
    """Hold the gripper at a point 10 cm above the table, in front of the arm."""

    name = NAME
    instruction = "Hover over the table."
    config_class = HoverConfig
    scene = "reach"
    observation_layout = (("point", 3),)
    markers = {"target": "point"}
    terminate_on_success = False

    def sample_initial(self, rng, dtype):
        return {"point": jnp.asarray((0.25, 0.0, 0.10), dtype) + jax.random.uniform(rng, (3,), dtype, -0.02, 0.02)}

    def reset_to(self, rng, *, point):
        point = fixed_array("point", point, (3,))
        return self.start(rng, as_qpos0(self.mj_model, point.dtype), None, lambda _: {"point": point})

    def task_observation(self, physics, info):
        return {"point": info.task["point"]}

    def distance(self, physics, info):
        return jnp.linalg.norm(info.task["point"] - self.arm.ee_pos(physics))

    def success(self, physics, info):
        return self.distance(physics, info) < 0.02

    def reward_weights(self):
        return {"close": 1.0}

    def reward_terms(self, physics, info, success):
        return {"close": jnp.exp(-10.0 * self.distance(physics, info))}


@pytest.fixture(scope="module")
def registered():
    return so101_mjx.register(Hover)


def test_register_makes_a_named_env(registered):
    assert registered is Hover and NAME in so101_mjx.names()
    assert so101_mjx.register(Hover) is Hover  # again: nothing happens
    env = so101_mjx.make(NAME, backend="c")
    assert isinstance(env, Hover) and env.observation_size == 14 + 3
    state = jax.jit(env.reset)(jax.random.PRNGKey(0))
    state = jax.jit(env.step)(state, jnp.array([1.0, 0.0, 0.0, 0.5]))
    assert np.isfinite(np.asarray(state.obs)).all() and 0 < float(state.reward) <= 1


def test_rollout_runs_the_registered_task(registered):
    out = run_episodes(so101_mjx.make(NAME, backend="c"), "random", jax.random.PRNGKey(1), num_envs=3, steps=5)
    assert out["returns"].shape == (3,) and np.isfinite(np.asarray(out["returns"])).all()
    assert (np.asarray(out["length"]) == 5).all()  # no termination: every episode runs its 5 steps


def test_gymnasium_id(registered):
    import so101_mjx.gym  # noqa: F401  (registers every task's id, this one included)

    env = gymnasium.make(f"so101_mjx/{NAME}")
    obs, _ = env.reset(seed=0)
    assert obs["agent_pos"].shape == (14,) and obs["environment_state"].shape == (3,)
    env.close()


@pytest.mark.slow  # a training run
def test_trains_with_the_tiny_preset_through_the_cli(registered, tmp_path, capsys):
    jax.config.update("jax_enable_x64", False)
    try:
        assert cli.main(["train", "--env", NAME, "--preset", "tiny", "--out", str(tmp_path / "run"), "--export"]) == 0
    finally:
        jax.config.update("jax_enable_x64", True)
    assert (tmp_path / "run" / "policy.onnx").is_file()
    assert cli.main(["train", "--env", NAME, "--out", str(tmp_path / "run2")]) == 2  # no default preset: one line
    assert "has no training presets but 'tiny'" in capsys.readouterr().err


def test_bad_registrations_are_input_errors(registered):
    class Nameless(Hover):  # inherits Hover's name: a registered task declares its own
        pass

    with pytest.raises(InputError, match="must declare name"):
        so101_mjx.register(Nameless)

    class Impostor(Hover):
        name = NAME

    with pytest.raises(InputError, match="registered already"):
        so101_mjx.register(Impostor)
    with pytest.raises(InputError, match="SO101Env subclass"):
        so101_mjx.register(dict)
