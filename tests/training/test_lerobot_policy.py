"""``lerobot:DIR`` policies without lerobot: the directory's checks, and the batched host callback that
runs one policy call per control step for every world of a rollout (a stand-in runner in numpy)."""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import one_error_line

from so101_mjx import cli
from so101_mjx.envs import make
from so101_mjx.envs.rollout import run_episodes
from so101_mjx.errors import InputError, MissingFileError
from so101_mjx.training import lerobot_policy, policies

ENV = "SO101PickCube-v0"
SIDE = 16


def write_policy_dir(path, inputs=None, outputs=None, files=lerobot_policy.FILES, steps=()):
    """A directory with lerobot's file names and a config.json of ``inputs`` / ``outputs`` (the follower's by
    default); the weights are not read by :func:`lerobot_policy.read_features`."""
    path.mkdir()
    inputs = inputs or {"observation.state": {"type": "STATE", "shape": [6]},
                        "observation.images.front": {"type": "VISUAL", "shape": [3, SIDE, SIDE]}}
    outputs = outputs or {"action": {"type": "ACTION", "shape": [6]}}
    for name in files:
        text = {"config.json": json.dumps({"type": "act", "input_features": inputs, "output_features": outputs}),
                "policy_preprocessor.json": json.dumps({"name": "policy_preprocessor", "steps": list(steps)}),
                "policy_postprocessor.json": json.dumps({"name": "policy_postprocessor", "steps": []})}.get(name, "")
        (path / name).write_text(text)
    return path


def test_the_followers_features_give_the_cameras_and_frame_side(tmp_path):
    cameras, side = lerobot_policy.read_features(write_policy_dir(tmp_path / "p"))
    assert (cameras, side) == (("front",), SIDE)
    config = lerobot_policy.env_config(cameras, side)
    assert config["control_mode"] == "joint" and config["control_dt"] == pytest.approx(1 / 30)
    assert config["episode_length"] == 300  # 10 s
    assert config["image_cameras"] == ["front"] and config["image_size"] == SIDE and config["joint_units"] == "degrees"


IMAGE = {"type": "VISUAL", "shape": [3, SIDE, SIDE]}
STATE = {"type": "STATE", "shape": [6]}


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"files": lerobot_policy.FILES[:2]}, "is not a lerobot policy directory: policy_preprocessor.json, "
                                          "policy_postprocessor.json missing"),
    ({"steps": [{"registry_name": "normalizer_processor", "state_file": "stats.safetensors"}]},
     "the normalization stats stats.safetensors that policy_preprocessor.json names are missing"),
    ({"inputs": {"observation.state": {"type": "STATE", "shape": [14]}, "observation.images.front": IMAGE}},
     "observation.state must have shape (6,) (the follower's six motor positions), got (14,)"),
    ({"outputs": {"action": {"type": "ACTION", "shape": [4]}}}, "action must have shape (6,)"),
    ({"inputs": {"observation.state": STATE, "observation.images.top": IMAGE}},
     "its cameras must be among the scene's ['front', 'wrist'] (at least one), got ['top']"),
    ({"inputs": {"observation.state": STATE}}, "its cameras must be among the scene's"),
    ({"inputs": {"observation.state": STATE, "observation.environment_state": STATE,
                 "observation.images.front": IMAGE}},
     "it observes ['observation.environment_state'], which the follower does not give"),
    ({"inputs": {"observation.state": STATE, "observation.images.front": IMAGE,
                 "observation.images.wrist": {"type": "VISUAL", "shape": [3, 32, 32]}}},
     "every camera's frames must have one shape (3, S, S)"),
    ({"inputs": {"observation.state": STATE, "observation.images.front": {"type": "VISUAL", "shape": [3, 16, 24]}}},
     "every camera's frames must have one shape (3, S, S) (square, channels first), got [(3, 16, 24)]"),
])
def test_a_directory_that_does_not_fit_the_follower_is_one_line(tmp_path, kwargs, message):
    path = write_policy_dir(tmp_path / "p", **kwargs)
    with pytest.raises(InputError) as err:
        lerobot_policy.read_features(path)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_a_missing_directory_is_one_line_in_every_command(tmp_path, capsys):
    with pytest.raises(MissingFileError, match="lerobot policy directory not found"):
        policies.load(f"lerobot:{tmp_path / 'none'}")
    assert cli.main(["evaluate", f"lerobot:{tmp_path / 'none'}", "--out", str(tmp_path / "r")]) == 2
    one_error_line(capsys, "lerobot policy directory not found")


class NumpyRunner(lerobot_policy.Runner):
    """A stand-in for the torch runner: a fixed map of the motor positions and the frames' mean, which logs
    the batch of every call."""

    def __init__(self, cameras):  # no torch: the base class's callback and reset contract only
        self.cameras, self.calls, self.resets = tuple(cameras), [], 0

    def reset(self):
        self.resets += 1

    def __call__(self, agent_pos, *frames, instruction=""):
        self.calls.append((len(agent_pos), instruction))
        return target(agent_pos, frames[0], np)


def target(agent_pos, frame, xp):
    """Absolute targets (B, 6): halfway to zero, the gripper opened by the frame's brightness."""
    light = xp.mean(frame.astype(xp.float32), axis=(1, 2, 3)) / 255.0
    return (0.5 * agent_pos + xp.stack([0 * light] * 5 + [50 * light], axis=1)).astype(xp.float32)


def test_one_call_per_control_step_for_every_world(tmp_path):
    """The rollout runs in jit; each control step calls the runner once with all worlds (B = 4), with the task's
    instruction, and the actions taken are the runner's on each step's observations. The policy runs in any
    task, from random placements."""
    path = write_policy_dir(tmp_path / "p")
    cameras, side = lerobot_policy.read_features(path)
    meta = {"env": ENV, "env_config": {**lerobot_policy.env_config(cameras, side), "image_quality": "fast",
                                       "episode_length": 4},
            "action_bounds": [[-180.0] * 6, [180.0] * 6]}
    runner = NumpyRunner(cameras)
    policy = policies.Policy(path, "lerobot", ENV, meta, True, runner=runner)
    assert policy.env_for("SO101PickPlace-v0") == ("SO101PickPlace-v0",
                                                   {**meta["env_config"], "random_block_position": True})
    name, config = policy.env_for("SO101Reach-v0")  # a random target per world
    env = make(name, "c", **config)
    policy.reset()
    out = run_episodes(env, policy.env_fn(env), jax.random.PRNGKey(3), 4, trajectory=True)
    assert runner.resets == 1 and runner.calls == [(4, env.instruction)] * 4
    seen = out["states"].obs  # (B, T) after each step: what the next step's call saw
    want = target(seen["agent_pos"][:, :-1].reshape(-1, 6), seen["pixels/front"][:, :-1].reshape(-1, side, side, 3),
                  jnp)
    actions = np.asarray(out["actions"])[:, 1:].reshape(-1, 6)
    np.testing.assert_allclose(actions, np.asarray(want), rtol=1e-6, atol=1e-4)
    assert np.ptp(actions, axis=0).max() > 1  # the worlds and steps differ: a real comparison
