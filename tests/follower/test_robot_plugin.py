"""The lerobot robot plugin (plugins/lerobot_robot_so101_mjx): with lerobot installed (Python >= 3.12,
not in CI), lerobot's own plugin discovery and make_robot_from_config build the simulated follower
with so101_follower's features. Without lerobot, the plugin package imports and registers nothing."""

import importlib
import sys
from pathlib import Path

import pytest

PLUGIN = Path(__file__).resolve().parents[2] / "plugins" / "lerobot_robot_so101_mjx"
sys.path.insert(0, str(PLUGIN))


def test_the_distribution_name_is_one_lerobot_discovers():
    text = (PLUGIN / "pyproject.toml").read_text()
    assert 'name = "lerobot_robot_so101_mjx"' in text  # register_third_party_plugins: the "lerobot_robot_" prefix
    package = importlib.import_module("lerobot_robot_so101_mjx")
    if importlib.util.find_spec("lerobot") is None:
        assert not hasattr(package, "SO101Mjx")


def test_lerobot_builds_it_with_the_followers_features(tmp_path):
    pytest.importorskip("lerobot")
    from lerobot.robots import make_robot_from_config
    from lerobot.robots.config import RobotConfig
    from lerobot_robot_so101_mjx import SO101Mjx

    config = RobotConfig.get_choice_class("so101_mjx")(camera_names=["front"], camera_height=24, camera_width=32,
                                                       real_time=False, calibration_dir=tmp_path)
    robot = make_robot_from_config(config)
    assert isinstance(robot, SO101Mjx)
    motors = ["shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper"]
    assert robot.action_features == {f"{m}.pos": float for m in motors}
    assert robot.observation_features == {**robot.action_features, "front": (24, 32, 3)}
    robot.connect()
    try:
        obs = robot.get_observation()
        action = {k: obs[k] for k in robot.action_features}
        action["wrist_roll.pos"] += 5.0
        assert robot.send_action(action) == action
    finally:
        robot.disconnect()
    with pytest.raises(ValueError, match="out_of_range"):
        RobotConfig.get_choice_class("so101_mjx")(out_of_range="wrap")


@pytest.mark.parametrize("kwargs, field",
                         [({"fps": 7}, "fps"), ({"fps": 10**6}, "fps"), ({"camera_height": 10**6}, "camera_height"),
                                           ({"task_options": {"bad": 1}}, "task_options")])
def test_bad_values_fail_at_construction(kwargs, field):
    """As the config's docstring says: ``--robot.fps=7`` and the like fail when lerobot parses the config, not at
    connect()."""
    pytest.importorskip("lerobot")
    from lerobot.robots.config import RobotConfig

    with pytest.raises(ValueError, match=field):
        RobotConfig.get_choice_class("so101_mjx")(**kwargs)
