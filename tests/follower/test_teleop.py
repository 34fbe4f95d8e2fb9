"""so101-mjx teleop (issue 33, item 4): scripted key events move the simulated arm as the module documents."""

import io
import subprocess
import sys

import numpy as np
import pytest

from so101_mjx.follower.teleop import cartesian_action, joint_targets, teleop

LIMITS = np.asarray([[-110, 110]] * 5 + [[0, 100]], np.float64)


def test_joint_keys_move_one_motor_each():
    start = np.zeros(6)
    np.testing.assert_array_equal(joint_targets(start, "qq", 2.0, LIMITS), [4, 0, 0, 0, 0, 0])
    np.testing.assert_array_equal(joint_targets(start, "asdfgh", 1.0, LIMITS), [-1, -1, -1, -1, -1, 0])  # gripper at 0
    np.testing.assert_array_equal(joint_targets(start, "wertyz?", 1.0, LIMITS), [0, 1, 1, 1, 1, 1])  # others ignored
    np.testing.assert_array_equal(joint_targets(start, "q" * 100, 2.0, LIMITS)[0], 110)  # within the range


def test_cartesian_keys_and_grasp():
    action, grasp = cartesian_action("wwa", 1.0)
    np.testing.assert_array_equal(action, [1, 1, 0, 1])
    action, grasp = cartesian_action("fc", grasp)
    np.testing.assert_array_equal(action, [0, 0, -1, 0])
    assert cartesian_action("", grasp)[1] == 0.0  # the jaw stays closed


def test_scripted_joint_presses_move_the_simulated_arm():
    """20 periods of 'e' (elbow +2 degrees each) then 30 still periods: the elbow settles near +40
    degrees from home; the wrist roll, never pressed, stays put."""
    home = teleop(stream=io.StringIO(""), max_steps=1)
    result = teleop(stream=io.StringIO("e\n" * 20 + "\n" * 30 + "x\n"))
    assert result["steps"] == 50
    assert abs(result["elbow_flex.pos"] - (home["elbow_flex.pos"] + 40)) < 3
    assert abs(result["wrist_roll.pos"] - home["wrist_roll.pos"]) < 0.5


def test_scripted_cartesian_presses_move_the_ik_target():
    """A still period (the target snaps to the arm's IK point), then four 'r' presses: the target rises
    by four times action_scale (1 cm)."""
    scale = 0.01  # teleop's default: 1 cm per press
    still = teleop(mode="cartesian", stream=io.StringIO("\n"))
    result = teleop(mode="cartesian", stream=io.StringIO("\n" + "r\n" * 3 + "rc\n"))  # a still period would snap again
    np.testing.assert_allclose(np.subtract(result["ik_target"], still["ik_target"]), [0, 0, 4 * scale], atol=1e-6)
    assert result["grasp"] == 0.0 and result["steps"] == 5


@pytest.mark.slow
def test_cli_reads_keys_from_a_pipe_and_refuses_a_bad_mode():
    out = subprocess.run([sys.executable, "-m", "so101_mjx", "teleop", "--max-steps", "3", "--step", "5"],
                         input="t\nt\nt\n", capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "steps=3" in out.stdout and "wrist_roll.pos=" in out.stdout
    with pytest.raises(ValueError, match="mode must be one of"):
        teleop(mode="gamepad", stream=io.StringIO(""))
