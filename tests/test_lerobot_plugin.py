"""The lerobot env plugin (plugins/lerobot_env_so101_mjx).

Its derivation (:mod:`lerobot_env_so101_mjx.spec`) is checked for every registered task against
the gym env it configures, without lerobot or torch; with lerobot and the plugin installed,
lerobot's own discovery and ``make_env`` build an env whose observations fit the features.
"""

import importlib.metadata
import json
import logging
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

import so101_mjx.gym as sgym
from so101_mjx.envs import default_config, names

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "plugins" / "lerobot_env_so101_mjx"))
from lerobot_env_so101_mjx import spec as plugin


@pytest.mark.parametrize("name", names())
def test_spec_fits_the_gym_env_it_configures(name):
    s = plugin.task_spec(name, action_scale=0.03, episode_length=7)
    env = gym.make(s.gym_id, **s.gym_kwargs)
    space = env.observation_space
    assert set(s.features) == {"action", "agent_pos", "environment_state"}
    assert s.features["action"] == ("ACTION", env.action_space.shape)
    assert s.features["agent_pos"] == ("STATE", space["agent_pos"].shape)
    assert s.features["environment_state"] == ("ENV", space["environment_state"].shape)
    assert env.spec.max_episode_steps == s.episode_length == 7
    assert env.unwrapped.env.config.action_scale == 0.03
    assert s.fps == env.metadata["render_fps"]
    assert s.package_name == type(env.unwrapped).__module__
    env.close()


@pytest.mark.parametrize("name", names())
def test_unset_fields_take_the_tasks_values(name):
    s = plugin.task_spec(name)
    config = default_config(name)
    has = [k for k in plugin.TASK_OPTIONS if hasattr(config, k)]
    assert s.task_options == {k: getattr(config, k) for k in has}
    assert s.episode_length == s.gym_kwargs["max_episode_steps"] == config.episode_length
    assert {k: s.gym_kwargs[k] for k in has} == s.task_options
    assert s.features_map == {k: plugin.LEROBOT_KEYS[k] for k in s.features}
    frame = s.gym_kwargs["render_spec"]
    assert (s.frame_size == (frame.height, frame.width)
            == (sgym.GymRenderingSpec().height, sgym.GymRenderingSpec().width))
    for missing in set(plugin.TASK_OPTIONS) - set(has):
        with pytest.raises(ValueError, match=missing):
            plugin.task_spec(name, **{missing: getattr(default_config("SO101PickCube-v0"), missing)})


def test_image_obs_features_fit_the_gym_env():
    s = plugin.task_spec("so101_mjx/SO101PickPlace-v0", image_obs=True, observation_height=48, observation_width=64)
    assert s.task == "SO101PickPlace-v0"
    assert set(s.features) == {"action", "agent_pos", plugin.PIXELS_KEY}
    assert s.features_map[plugin.PIXELS_KEY] == "observation.images.front"
    env = gym.make(s.gym_id, **s.gym_kwargs)
    front = env.observation_space["pixels"]["front"]
    assert (s.features[plugin.PIXELS_KEY] == ("VISUAL", front.shape) and front.shape == (48, 64, 3)
            and s.frame_size == (48, 64))
    assert "environment_state" not in env.observation_space.spaces
    env.close()


def test_joint_mode_is_the_followers_features():
    """``control_mode=joint``: the six motor targets and positions in the follower's units, at 30 fps."""
    s = plugin.task_spec("SO101PickCube-v0", control_mode="joint", joint_units="range_m100_100")
    env = gym.make(s.gym_id, **s.gym_kwargs)
    assert s.features["action"] == ("ACTION", env.action_space.shape) == ("ACTION", (6,))
    assert s.features["agent_pos"] == ("STATE", env.observation_space["agent_pos"].shape) == ("STATE", (6,))
    assert s.fps == 30 == env.metadata["render_fps"]
    assert s.task_options["control_mode"] == "joint" and env.unwrapped.env.config.joint_units == "range_m100_100"
    env.close()


def test_cameras_give_one_image_feature_each():
    s = plugin.task_spec("SO101PickCube-v0", image_obs=True, cameras="front, wrist", image_quality="fast",
                         observation_height=24, observation_width=32)
    assert s.features["pixels/wrist"] == ("VISUAL", (24, 32, 3))
    assert s.features_map["pixels/wrist"] == "observation.images.wrist"
    assert s.features_map["pixels/front"] == "observation.images.front"
    assert s.gym_kwargs["image_cameras"] == s.vector_kwargs["image_cameras"] == ("front", "wrist")
    assert s.gym_kwargs["image_quality"] == s.vector_kwargs["image_quality"] == "fast"
    env = gym.make(s.gym_id, **s.gym_kwargs)
    assert {f"pixels/{c}": ("VISUAL", b.shape) for c, b in env.observation_space["pixels"].items()} == {
        k: v for k, v in s.features.items() if k.startswith("pixels/")}
    env.close()
    default = plugin.task_spec("SO101PickCube-v0", image_obs=True)  # the reference's gym kwargs, unchanged
    assert not {"image_cameras", "image_quality", "camera_specs"} & set(default.gym_kwargs)


def test_camera_specs_reach_the_gym_env_and_the_vector_env(tmp_path):
    """``--env.camera_specs`` names each camera's file (a shipped name or a path): both envs get the same mapping,
    and the gym env's frames are drawn through the files' lenses and latency."""
    front = tmp_path / "front.json"
    front.write_text(json.dumps({"fovy": 30.0, "latency": 1}))
    s = plugin.task_spec("SO101PickCube-v0", image_obs=True, cameras="front,wrist", image_quality="fast",
                         camera_specs=f"wrist=menagerie_wrist, front={front}", observation_height=24,
                         observation_width=32)
    expected = {"wrist": "menagerie_wrist", "front": str(front)}
    assert s.gym_kwargs["camera_specs"] == s.vector_kwargs["camera_specs"] == expected
    env = gym.make(s.gym_id, **s.gym_kwargs)
    plain = gym.make(s.gym_id, **{k: v for k, v in s.gym_kwargs.items() if k != "camera_specs"})
    obs, _ = env.reset(seed=0)
    other, _ = plain.reset(seed=0)
    assert not np.array_equal(obs["pixels"]["front"], other["pixels"]["front"])  # the narrower lens
    assert env.unwrapped._rig.lags == {"front": 1, "wrist": 0}
    env.close(), plain.close()


def test_vector_kwargs_build_the_vector_env_of_the_gym_env():
    """What the plugin's ``create_envs`` builds (lerobot >= 0.6, state observations) fits the features, on a task
    with no reference env (every reset quantity drawn from the JAX key)."""
    from so101_mjx.gym.vector import SO101VectorEnv

    s = plugin.task_spec("SO101PushCube-v0", episode_length=5, observation_height=32, observation_width=48)
    vec = SO101VectorEnv(s.task, 2, **s.vector_kwargs)
    single = gym.make(s.gym_id, **s.gym_kwargs)
    assert vec.single_observation_space == single.observation_space and vec.single_action_space == single.action_space
    assert vec.call("_max_episode_steps") == (5, 5) and vec.render_size == (32, 48)
    obs, _ = vec.reset(seed=[3, 4])
    first, _ = single.reset(seed=4)
    np.testing.assert_allclose(obs["environment_state"][1], first["environment_state"], atol=1e-5)
    _, _, _, _, info = vec.step(np.zeros((2, 4), np.float32))
    assert info["is_success"].shape == (2,)
    vec.close(), single.close()


@pytest.mark.slow  # render workers
def test_vector_kwargs_with_image_obs_build_a_vector_env_of_frames():
    from so101_mjx.gym.vector import SO101VectorEnv

    s = plugin.task_spec("SO101PickCube-v0", image_obs=True, episode_length=5, observation_height=24,
                         observation_width=32)
    vec = SO101VectorEnv(s.task, 2, **s.vector_kwargs)
    single = gym.make(s.gym_id, **s.gym_kwargs)
    assert vec.single_observation_space == single.observation_space
    obs, _ = vec.reset(seed=[3, 4])
    first, _ = single.reset(seed=4)
    assert np.array_equal(obs["pixels"]["front"][1], first["pixels"]["front"])
    assert s.features[plugin.PIXELS_KEY] == ("VISUAL", obs["pixels"]["front"].shape[1:])
    vec.close(), single.close()


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"task": "SO101Nope-v0"}, "task must be one of"),
        ({"action_scale": -1.0}, "action_scale"),
        ({"reward_type": "shaped"}, "reward_type"),
        ({"episode_length": 0}, "episode_length"),
        ({"fps": 30}, "fps must be None or"),
        ({"image_obs": "yes"}, "image_obs"),
        ({"observation_height": 0}, "observation_height"),
        ({"observation_width": 1.5}, "observation_width"),
        ({"control_dt": 0.05}, "unknown task option"),
        ({"control_mode": "torque"}, "control_mode"),
        ({"cameras": "front,front", "image_obs": True}, "cameras must be distinct"),
        ({"cameras": "", "image_obs": True}, "cameras must be distinct"),
        ({"cameras": "front,wrist"}, "set image_obs=true"),
        ({"image_quality": "ultra"}, "image_quality must be one of"),
        ({"camera_specs": "wrist", "image_obs": True, "cameras": "front,wrist"}, "camera=file pairs"),
        ({"camera_specs": "wrist=menagerie_wrist", "image_obs": True}, "not among cameras"),
        ({"camera_specs": "front=/nonexistent/front.json", "image_obs": True}, r"camera_specs\['front'\]"),
        ({"camera_specs": "front=menagerie_wrist"}, "set image_obs=true"),
    ],
)
def test_bad_values_raise_naming_the_field(kwargs, field):
    kwargs = {"task": "SO101PickCube-v0", **kwargs}
    with pytest.raises(ValueError, match=field):
        plugin.task_spec(kwargs.pop("task"), **kwargs)


def test_lerobot_discovers_the_plugin_and_makes_the_env(caplog):
    pytest.importorskip("lerobot")
    try:
        dist = importlib.metadata.distribution("lerobot_env_so101_mjx")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("the plugin is not installed (pip install ./plugins/lerobot_env_so101_mjx)")
    from lerobot.envs.configs import EnvConfig
    from lerobot.envs.factory import make_env, make_env_config
    from lerobot.envs.utils import env_to_policy_features, preprocess_observation
    from lerobot.utils import constants
    from lerobot.utils.import_utils import register_third_party_plugins

    assert dist.metadata["Name"] == "lerobot_env_so101_mjx"  # the raw name lerobot matches and imports
    with caplog.at_level(logging.INFO):
        register_third_party_plugins()
    assert "Imported third-party plugin: lerobot_env_so101_mjx" in caplog.messages
    assert "so101_mjx" in EnvConfig.get_known_choices()
    assert plugin.LEROBOT_KEYS == {
        "action": constants.ACTION,
        "agent_pos": constants.OBS_STATE,
        "environment_state": constants.OBS_ENV_STATE,
        plugin.PIXELS_KEY: f"{constants.OBS_IMAGES}.front",
    }

    cfg = make_env_config("so101_mjx", task="SO101PickPlace-v0", action_scale=0.03)
    task_config = default_config(cfg.task)
    assert cfg.fps == round(1 / task_config.control_dt) and cfg.episode_length == task_config.episode_length
    assert (cfg.action_scale, cfg.random_block_position) == (0.03, task_config.random_block_position)
    assert (cfg.observation_height, cfg.observation_width) == plugin.task_spec(cfg.task).frame_size
    vec = make_env(cfg, n_envs=1)["so101_mjx"][0]
    assert vec.call("_max_episode_steps")[0] == task_config.episode_length
    obs, _ = vec.reset(seed=0)
    obs, reward, terminated, truncated, _ = vec.step(np.zeros((1, 4), np.float32))
    batch = preprocess_observation(obs)
    features = env_to_policy_features(cfg)
    for key, feature in features.items():
        if key != constants.ACTION:
            assert tuple(batch[key].shape) == (1, *feature.shape), key
    assert features[constants.ACTION].shape == vec.single_action_space.shape
    assert np.isfinite(reward).all() and not terminated.any() and not truncated.any()
    vec.close()
    from so101_mjx.gym.vector import SO101VectorEnv

    assert isinstance(vec, SO101VectorEnv)  # state observations: the worlds stepped together
    sync = make_env(make_env_config("so101_mjx", task="SO101PickPlace-v0", vector=False), n_envs=2)["so101_mjx"][0]
    assert not isinstance(sync, SO101VectorEnv) and sync.num_envs == 2  # vector=False: lerobot's own vector env
    sync.close()
