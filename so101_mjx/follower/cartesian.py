"""A Cartesian-mode policy on a follower: its observation from the measured motor positions, and its
``[dx, dy, dz, grasp]`` actions as six motor targets through the library's IK, on the host.

:class:`CartesianAdapter` runs the training env's own control (``SO101Arm.cartesian_targets``: the
reference's IK-target update, then IK from the measured joints, and the jaw command) on a physics
state whose joints are the measured ones. The observation's ``agent_pos`` (14) is rebuilt from the
measurements: arm joint angles; joint velocities as finite differences over the control period (the
simulator's are instantaneous); the gripper pose from the jaw command last sent (as the env reads
its ctrl); and the end-effector position by forward kinematics of the measured joints (the env's
sensor reads it one physics step earlier). Those differences are the price of a follower that
reports positions only; ``deploy`` measures what they cost against ``eval``.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from so101_mjx.envs import registry
from so101_mjx.robot import motors
from so101_mjx.robot.calibration import Calibration
from so101_mjx.robot.gripper import ctrl_to_gripper_pose
from so101_mjx.robot.scenes import EE_SITE


class CartesianAdapter:
    """The env ``name`` (backend ``c``, ``env_config``) as a translator between a follower in ``units``
    (motor values (6,); under the follower's ``calibration`` when given) and a Cartesian policy;
    :meth:`reset` before each episode."""

    def __init__(self, name: str, env_config: dict[str, Any], units: str, calibration: Calibration | None = None):
        self.env = registry.make(name, "c", **env_config)
        self.arm, self.units, self.calibration = self.env.arm, units, calibration
        self.dt = self.env.config.control_dt
        start = self.env.reset(jax.random.PRNGKey(0))
        self._template, self._info0 = start.physics, start.info
        self._targets = jax.jit(self._control)
        self._reset_info = jax.jit(lambda physics: self._info0.replace(ik_target=self.arm.ik_point(physics)))
        self.reset()

    def reset(self) -> None:
        """A new episode: no velocity history, the reset's jaw command, the IK target at the arm (first action)."""
        self._previous: np.ndarray | None = None
        self._jaw = float(self._template.ctrl[self.arm.gripper_actuator])
        self._info = None

    def _angles(self, measured: np.ndarray) -> np.ndarray:
        """Joint angles (6,) rad, float64, of the motor values ``measured`` (6,)."""
        return motors.from_motor(np.asarray(measured, np.float64), self.arm.motor_ranges, self.units, self.calibration)

    def _physics(self, measured: np.ndarray):
        """The template physics state with the measured joints (qpos and kinematics) and the jaw command."""
        q = jnp.asarray(self._angles(measured), self._template.qpos.dtype)
        qpos = self._template.qpos.at[self.arm.qpos_ids].set(q[:5]).at[self.arm.gripper_qpos].set(q[5])
        ctrl = self._template.ctrl.at[self.arm.gripper_actuator].set(self._jaw)
        return self._template.replace(qpos=qpos, kin_qpos=qpos, ctrl=ctrl)

    def agent_pos(self, measured: np.ndarray) -> np.ndarray:
        """(14,) float32 ``[qpos (5), qvel (5), gripper_pose, ee_pos (3)]`` from motor values ``measured`` (6,)."""
        q = self._angles(measured)[:5]
        qvel = np.zeros(5) if self._previous is None else (q - self._previous) / self.dt
        self._previous = q
        ee = np.asarray(self.arm.kin.point(jnp.asarray(q), EE_SITE))
        pose = float(ctrl_to_gripper_pose(self._jaw, self.arm.gripper_range))
        return np.concatenate([q, qvel, [pose], ee]).astype(np.float32)

    def _control(self, physics, info, action):
        arm_q, jaw, info = self.arm.cartesian_targets(physics, info, action)
        arm_q = jnp.clip(arm_q, self.arm.ctrl_range[:, 0], self.arm.ctrl_range[:, 1])
        goal = motors.to_motor(jnp.concatenate([arm_q, jaw[None]]), self.arm.motor_ranges, self.units, self.calibration)
        return goal, jaw, info

    def targets(self, measured: np.ndarray, action: np.ndarray) -> np.ndarray:
        """Motor targets (6,) for the Cartesian ``action`` (4,) from the measured motor values (6,)."""
        physics = self._physics(measured)
        if self._info is None:
            self._info = self._reset_info(physics)
        goal, jaw, self._info = self._targets(physics, self._info, jnp.asarray(action, physics.qpos.dtype))
        self._jaw = float(jaw)
        return np.asarray(goal, np.float64)
