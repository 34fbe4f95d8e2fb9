"""The SO-101 arm on a physics backend: index tables, Cartesian IK control, observation pieces.

One :class:`SO101Arm` per env (and per simulated station). Control follows lerobot_env_so101
0.4.0 (``SO101GymEnv.apply_action``): the action ``[dx, dy, dz, grasp]`` moves an IK target by
``action_scale`` metres per unit, clipped to ``cartesian_bounds`` (default :data:`CARTESIAN_BOUNDS`); a near-zero delta
(‖a[:3]‖ < 1e-6) holds the current pose; ``grasp`` is an absolute jaw command in [0, 1]
(0 closed); one Levenberg–Marquardt IK per control step sets the arm's position actuators, then
``n_substeps`` physics steps follow. Non-finite actions never reach the physics: a NaN/inf
delta counts as zero (hold), a NaN/inf grasp keeps the previous jaw command, and the
``nonfinite_actions`` info entry counts them. A complex or non-numeric action is an InputError.

The gripper mappings (jaw command / open fraction <-> gripper ctrl, ``gripper_pose``) are
:mod:`so101_mjx.robot.gripper`'s.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
from jax import Array

from so101_mjx import _checks as checks
from so101_mjx.envs.joint_mode import JointMode
from so101_mjx.errors import InputError
from so101_mjx.ik import analytic as analytic_ik, iterative as ik
from so101_mjx.robot import motors
from so101_mjx.robot.gripper import ctrl_to_gripper_pose, ctrl_to_open_fraction, open_fraction_to_ctrl
from so101_mjx.robot.kinematics import Kinematics
from so101_mjx.robot.scenes import ARM_JOINTS, EE_SITE, GRIPPER_JOINT, actuator_ids, joint_dof_ids, joint_qpos_ids
from so101_mjx.sim import servo
from so101_mjx.sim.physics import Physics, PhysicsState
from so101_mjx.sim.state import Info

HOME_POSITION = (0.0, 0.0, 0.0, 0.0, 0.0)
CARTESIAN_BOUNDS = ((0.1, -0.3, 0.0), (0.5, 0.3, 0.4))
ZERO_ACTION_TOLERANCE = 1e-6
SERVO_DRAWS = 0x5E70  # folded into the reset key: the servo model's per-episode draws (sim.servo)
IK_DAMPING = 0.1
IK_ITERATIONS = 20
IK_TOLERANCE = 1e-4
IK_SOLVERS = ("lm", "analytic")
ROLL = ARM_JOINTS.index("wrist_roll")
# approach pitches the closed-form top-down IK tries, straight down first, in 7.5° steps to horizontal
ANALYTIC_PITCHES = tuple(float(np.pi / 2 - k * np.pi / 24) for k in range(13))
EE_SENSOR = "so101/ee_pos"
# agent_pos, the first 14 observation entries of every task: (name, size) in order
AGENT_POS_LAYOUT: tuple[tuple[str, int], ...] = (("qpos", 5), ("qvel", 5), ("gripper_pose", 1), ("ee_pos", 3))
AGENT_POS_SIZE = sum(size for _, size in AGENT_POS_LAYOUT)
# joint mode's agent_pos: the six motors' measured positions in the follower's units (robot.motors)
JOINT_AGENT_POS_LAYOUT: tuple[tuple[str, int], ...] = (("motor_pos", len(motors.MOTORS)),)
CARTESIAN_ACTION = "[dx, dy, dz, grasp]"
RELATIVE_BOUND = 10.0  # motor units per control step: relative targets' span without max_relative_target


def agent_pos_layout(control_mode: str) -> tuple[tuple[str, int], ...]:
    """``agent_pos``'s entries under ``control_mode``: :data:`AGENT_POS_LAYOUT`, or :data:`JOINT_AGENT_POS_LAYOUT` in
    joint mode."""
    return JOINT_AGENT_POS_LAYOUT if control_mode == "joint" else AGENT_POS_LAYOUT


class SO101Arm:
    """Index tables and control of the SO-101 in ``model`` stepped by ``physics``.

    Args:
        top_down_ik: IK of the jaw-pad midpoint with the approach axis pointing down (the
            reference's ``top_down_ik``), else of the ``gripperframe`` origin, position only.
        ik_solver: ``"lm"`` (the reference's 20 Levenberg–Marquardt iterations) or, with
            ``top_down_ik``, ``"analytic"``: the closed form (:mod:`so101_mjx.ik.analytic`) at the
            top-down seed's wrist roll and the steepest approach of :data:`ANALYTIC_PITCHES` that
            a branch within the joint limits reaches (straight down where possible; the reference's
            LM instead trades approach error against position error), that pitch's branch nearest
            the current joints; a target no branch reaches holds the joint targets.
        action_scale: metres of IK-target motion per unit action.
        n_substeps: physics steps per control step.
        home_position: (5,) arm joint angles [rad] at reset (joints and their position targets).
        cartesian_bounds: (2, 3) min / max of the IK target [m] (Cartesian mode).
        servo_model: the servos between the targets and the physics (:mod:`so101_mjx.sim.servo`),
            or None for ideal position servos.
        joint_mode: joint-mode control (actions are motor targets, ``agent_pos`` the motor
            positions), or None for the reference's Cartesian control.
    """

    def __init__(self, model: mujoco.MjModel, physics: Physics, *, top_down_ik: bool, action_scale: float,
                 n_substeps: int, ik_solver: str = "lm", joint_mode: JointMode | None = None,
                 home_position=HOME_POSITION, cartesian_bounds=CARTESIAN_BOUNDS,
                 servo_model: servo.ServoModel | None = None):
        if ik_solver not in IK_SOLVERS or (ik_solver == "analytic" and not top_down_ik):
            raise InputError(f"ik_solver must be one of {IK_SOLVERS} ('analytic' needs top_down_ik=True), got "
                             f"{ik_solver!r}")
        self.model, self.physics = model, physics
        self.top_down_ik, self.action_scale, self.n_substeps = top_down_ik, action_scale, n_substeps
        self.ik_solver, self.joint_mode = ik_solver, joint_mode
        self.home_position = np.asarray(home_position, np.float64)  # (5,) rad
        self.cartesian_bounds = np.asarray(cartesian_bounds, np.float64)  # (2, 3) m
        self.kin = Kinematics.from_model(model, ARM_JOINTS)
        self.qpos_ids = joint_qpos_ids(model)  # (5,) arm joints in qpos
        self.dof_ids = joint_dof_ids(model)  # (5,) arm joints in qvel
        self.actuator_ids = actuator_ids(model)  # (5,) arm actuators in ctrl
        self.gripper_actuator = model.actuator(GRIPPER_JOINT).id
        self.gripper_qpos = model.joint(GRIPPER_JOINT).qposadr[0]
        self.gripper_range = model.actuator_ctrlrange[self.gripper_actuator].copy()  # (2,) rad
        self.ctrl_range = model.actuator_ctrlrange[self.actuator_ids].copy()  # (5, 2) rad
        self.actuated_qpos = model.jnt_qposadr[model.actuator_trnid[:, 0]]  # (nu,)
        self.actuated_dof = model.jnt_dofadr[model.actuator_trnid[:, 0]]  # (nu,)
        self.joint_lower, self.joint_upper = ik.joint_limits(model)
        # (6, 2) rad, arm joints then gripper: the motors' ranges (standing for a calibration when none is given)
        self.motor_ranges = motors.joint_ranges(model)
        self.ik_offset = ik.grasp_point_offset(model) if top_down_ik else None  # (3,) in the site frame
        self.geometry = (analytic_ik.ArmGeometry.from_kinematics(self.kin, EE_SITE, self.ik_offset)
                         if ik_solver == "analytic" else None)
        self.servo_model = servo_model
        if servo_model is not None:
            narrowest = float(np.min(np.diff(self.motor_ranges, axis=1)))
            if servo_model.range_of("deadband")[1] >= narrowest:
                raise InputError(f"servo_model.deadband ({servo_model.range_of('deadband')[1]} rad) must be narrower "
                                 f"than every motor's range (the narrowest: {narrowest:.4f} rad)")

    # -- state readers ------------------------------------------------------------------------
    def joint_q(self, physics: PhysicsState) -> Array:
        """Arm joint angles (..., 5) rad."""
        return physics.qpos[..., self.qpos_ids]

    def _observed(self, q: Array) -> Array:
        """Joint positions ``q`` as the encoders report them: whole counts with the servo model's ``quantize``."""
        return servo.quantized(q) if self.servo_model is not None and self.servo_model.quantize else q

    def ik_point(self, physics: PhysicsState) -> Array:
        """World position (..., 3) of the point the action moves, at the last kinematics evaluation."""
        return self.kin.point(physics.kin_qpos[..., self.qpos_ids], EE_SITE, self.ik_offset)

    def ee_pos(self, physics: PhysicsState) -> Array:
        """``gripperframe`` position (..., 3) from the ``so101/ee_pos`` sensor."""
        return self.physics.sensor(physics, EE_SENSOR)

    def gripper_ctrl(self, grasp: Array) -> Array:
        """Jaw command in [0, 1] (clipped; 0 closed) -> gripper ctrl in radians."""
        return open_fraction_to_ctrl(grasp, self.gripper_range).astype(grasp.dtype)

    def jaw_command(self, physics: PhysicsState) -> Array:
        """The gripper ctrl as an open fraction in [0, 1] (0 closed): what the jaw is told, not where it is."""
        return ctrl_to_open_fraction(physics.ctrl[..., self.gripper_actuator], self.gripper_range)

    def jaw_opening(self, physics: PhysicsState) -> Array:
        """Gripper joint position mapped to [0, 1] like the command (0 closed), not clipped."""
        return ctrl_to_open_fraction(physics.qpos[..., self.gripper_qpos], self.gripper_range, clip=False)

    @property
    def agent_pos_layout(self) -> tuple[tuple[str, int], ...]:
        """:func:`agent_pos_layout` of this arm's control mode."""
        return agent_pos_layout("cartesian" if self.joint_mode is None else "joint")

    @property
    def action_size(self) -> int:
        return 4 if self.joint_mode is None else len(motors.MOTORS)

    @property
    def action_layout(self) -> str:
        """The action's entries, in words (errors, export metadata)."""
        return CARTESIAN_ACTION if self.joint_mode is None else self.joint_mode.action_layout

    def action_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """``(low, high)`` (action_size,) of a meaningful action: [-1, 1]^3 x [0, 1] in Cartesian mode;
        the motor limits, or ±``max_relative`` (default :data:`RELATIVE_BOUND`) with relative targets."""
        if self.joint_mode is None:
            return np.asarray([-1.0, -1.0, -1.0, 0.0]), np.ones(4)
        if self.joint_mode.relative:
            bound = np.full(len(motors.MOTORS), self.joint_mode.max_relative or RELATIVE_BOUND)
            return -bound, bound
        limits = self.joint_mode.limits(self.motor_ranges)
        return limits[:, 0], limits[:, 1]

    def hold_action(self, physics: PhysicsState) -> Array:
        """The action that keeps every target where it is: Cartesian (0, 0, 0) with the jaw open, or in
        joint mode the present targets (zero offsets when relative)."""
        dtype = physics.qpos.dtype
        if self.joint_mode is None:
            return jnp.asarray([0.0, 0.0, 0.0, 1.0], dtype)
        if self.joint_mode.relative:
            return jnp.zeros(len(motors.MOTORS), dtype)
        return self._motor_targets(physics)

    @property
    def _joint(self) -> JointMode:
        """The joint mode, for the methods that run in joint mode only."""
        assert self.joint_mode is not None, "joint mode only"
        return self.joint_mode

    def _motor_targets(self, physics: PhysicsState) -> Array:
        """The position actuators' targets (6,) in motor units."""
        ctrl = jnp.concatenate([physics.ctrl[self.actuator_ids], physics.ctrl[self.gripper_actuator, None]])
        return self._joint.to_motor(ctrl, self.motor_ranges)

    def agent_pos(self, physics: PhysicsState) -> Array:
        """:data:`AGENT_POS_LAYOUT`: [qpos (5), qvel (5), gripper_pose, ee_pos (3)], shape (..., 14);
        in joint mode the motor positions (..., 6) (:meth:`motor_positions`)."""
        if self.joint_mode is not None:
            return self.motor_positions(physics)
        return jnp.concatenate([
            self._observed(physics.qpos[..., self.qpos_ids]),
            physics.qvel[..., self.dof_ids],
            ctrl_to_gripper_pose(physics.ctrl[..., self.gripper_actuator], self.gripper_range)[..., None],
            self.ee_pos(physics),
        ], axis=-1)

    def actuator_force(self, physics: PhysicsState) -> Array:
        """Position-actuator forces (..., nu) N·m: clip(kp·(ctrl − q) − kv·q̇, forcerange)."""
        m = self.model
        dtype = physics.qpos.dtype
        q = physics.qpos[..., self.actuated_qpos]
        v = physics.qvel[..., self.actuated_dof]
        force = (jnp.asarray(m.actuator_gainprm[:, 0], dtype) * physics.ctrl
                 + jnp.asarray(m.actuator_biasprm[:, 1], dtype) * q
                 + jnp.asarray(m.actuator_biasprm[:, 2], dtype) * v)
        return jnp.clip(force, m.actuator_forcerange[:, 0], m.actuator_forcerange[:, 1])

    # -- control ---------------------------------------------------------------------------------
    def init(self, rng: Array, qpos: Array, params: dict[str, Array] | None = None,
             task: dict[str, Array] | None = None) -> tuple[PhysicsState, Info]:
        """Reset-time physics (arm at ``home_position``, jaw ctrl 0, at rest) from ``qpos`` (nq,), and the episode's
        :class:`~so101_mjx.sim.state.Info` (``rng`` for the next reset, per-episode model ``params``,
        the task's entries ``task``)."""
        dtype = qpos.dtype
        home = jnp.asarray(self.home_position, dtype)
        qpos = qpos.at[self.qpos_ids].set(home)
        ctrl = jnp.zeros(self.model.nu, dtype).at[self.actuator_ids].set(home)
        physics = self.physics.init(qpos, jnp.zeros(self.model.nv, dtype), ctrl)
        info = Info(
            rng=rng, succeed=jnp.zeros((), bool), ik_target=self.ik_point(physics),
            last_action_zero=jnp.zeros((), bool),
            nonfinite_actions=jnp.zeros((), jnp.int32), task=dict(task or {}), model_params=params,
            servo=None if self.servo_model is None else servo.initial(
                self.servo_model, ctrl[self.motor_ctrl_ids], jax.random.fold_in(rng, SERVO_DRAWS)),
        )
        return physics, info

    def solve_ik(self, physics: PhysicsState, target: Array) -> Array:
        """The reference's one IK per control step: joint targets (5,) for the world ``target`` (3,)."""
        dtype = physics.qpos.dtype
        q_arm = self.joint_q(physics)
        lower, upper = jnp.asarray(self.joint_lower, dtype), jnp.asarray(self.joint_upper, dtype)
        if self.top_down_ik:
            seed = ik.top_down_seed(self.kin, q_arm, lower, upper, frames_q=physics.kin_qpos[self.qpos_ids])
            if self.geometry is not None:
                return self._closed_form(physics, seed, target, lower, upper)
            return ik.levenberg_marquardt(
                self.kin, seed, target, offset=self.ik_offset, approach_axis=ik.APPROACH_AXIS,
                damping=IK_DAMPING, iterations=IK_ITERATIONS, tolerance=IK_TOLERANCE, lower=lower, upper=upper,
            )
        return ik.levenberg_marquardt(
            self.kin, q_arm, target, damping=IK_DAMPING, iterations=IK_ITERATIONS, tolerance=IK_TOLERANCE,
            lower=lower, upper=upper,
        )

    def _closed_form(self, physics: PhysicsState, seed: Array, target: Array, lower: Array, upper: Array) -> Array:
        """Top-down closed-form IK: the feasible branch (within the limits) nearest the current joints."""
        assert self.geometry is not None  # ik_solver="analytic"
        pitches = jnp.asarray(ANALYTIC_PITCHES, target.dtype)
        exists, q = analytic_ik.solve(self.geometry, jnp.broadcast_to(target, (len(ANALYTIC_PITCHES), 3)),
                                      pitches, seed[ROLL])
        feasible = exists & jnp.all((q >= lower) & (q <= upper) & jnp.isfinite(q), -1)  # (P, 4)
        steepest = jnp.argmax(jnp.any(feasible, -1))  # the first pitch (closest to straight down) some branch reaches
        cost = jnp.where(feasible[steepest], jnp.sum((q[steepest] - self.joint_q(physics)) ** 2, -1), jnp.inf)
        return jnp.where(jnp.any(feasible), q[steepest, jnp.argmin(cost)], physics.ctrl[self.actuator_ids])

    def control(self, physics: PhysicsState, info: Info, action: Array) -> tuple[PhysicsState, Info]:
        """Apply one action: (4,) [dx, dy, dz, grasp] (IK target update, gripper command, IK) or, in
        joint mode, (6,) motor targets; then ``n_substeps`` of physics."""
        action = self._checked(action, physics.qpos.dtype)
        if self.joint_mode is not None:
            return self._joint_control(physics, info, action)
        arm_q, gripper, info = self.cartesian_targets(physics, info, action)
        return self._servo_actuate(physics, info, arm_q, gripper)

    def _checked(self, action: Array, dtype) -> Array:
        """``action`` as a ``dtype`` array of this mode's shape; InputError for complex, text or another shape."""
        # complex, text: refused
        action = jnp.asarray(action if checks.is_traced(action) else checks.real_array("action", action))
        if action.dtype.kind not in "iuf":
            raise InputError(f"action must be real numbers (not complex or bool), got {action.dtype}")
        action = action.astype(dtype)
        if action.shape != (self.action_size,):
            raise InputError(f"action must have shape ({self.action_size},) = {self.action_layout}, got {action.shape}")
        return action

    def cartesian_targets(self, physics: PhysicsState, info: Info, action: Array) -> tuple[Array, Array, Info]:
        """The reference's control without the physics: ``(arm joint targets (5,) rad, gripper ctrl rad,
        info with the new IK target)`` for a Cartesian ``action`` (4,)."""
        finite = jnp.isfinite(action)
        target, is_zero = self.next_ik_target(physics, info, action[:3], self.action_scale, self.cartesian_bounds)
        gripper = jnp.where(finite[3], self.gripper_ctrl(action[3]), physics.ctrl[self.gripper_actuator])
        return self.solve_ik(physics, target), gripper, info.replace(
            ik_target=target, last_action_zero=is_zero,
            nonfinite_actions=info.nonfinite_actions + jnp.any(~finite).astype(jnp.int32),
        )

    def next_ik_target(self, physics: PhysicsState, info: Info, delta: Array, scale, bounds) -> tuple[Array, Array]:
        """The reference's IK-target update for ``delta`` (3,): ``(target (3,) m, is_zero)``. The target
        moves ``scale`` m per unit (NaN/inf components count as zero), a near-zero delta
        (‖delta‖ < 1e-6) holds the current IK point the first time, and it is clipped to ``bounds`` (2, 3) m."""
        dtype = physics.qpos.dtype
        raw = jnp.where(jnp.isfinite(delta), delta, 0.0)
        is_zero = jnp.linalg.norm(raw) < ZERO_ACTION_TOLERANCE
        snap = is_zero & ~info.last_action_zero
        moved = info.ik_target + jnp.where(is_zero, 0.0, raw * jnp.asarray(scale, dtype))
        lo, hi = (jnp.asarray(b, dtype) for b in bounds)
        return jnp.clip(jnp.where(snap, self.ik_point(physics), moved), lo, hi), is_zero

    # -- joint mode ------------------------------------------------------------------------------
    def motor_q(self, physics: PhysicsState) -> Array:
        """The six motors' joint angles (..., 6) rad as the encoders report them: the arm's five, then the gripper's."""
        q = jnp.concatenate([physics.qpos[..., self.qpos_ids], physics.qpos[..., self.gripper_qpos, None]], axis=-1)
        return self._observed(q)

    def motor_positions(self, physics: PhysicsState) -> Array:
        """Measured positions of the six motors (..., 6) in the follower's units (joint mode's ``agent_pos``)."""
        return self._joint.to_motor(self.motor_q(physics), self.motor_ranges)

    def _joint_control(self, physics: PhysicsState, info: Info, action: Array) -> tuple[PhysicsState, Info]:
        """Joint mode: motor targets (6,) (offsets from the measured positions when relative), a non-finite
        entry keeping that motor's previous target, each target within ``max_relative`` of the measured
        position (:meth:`joint_goal`) and, under a calibration, within the motor limits (a real follower's
        servos stop at their calibrated ranges' ends); the Info's IK target follows the arm (``ik_point``)."""
        finite = jnp.isfinite(action)
        goal = self.joint_goal(physics, action)
        if self._joint.calibration is not None:
            limits = jnp.asarray(self._joint.limits(self.motor_ranges), goal.dtype)
            goal = jnp.clip(goal, limits[:, 0], limits[:, 1])
        q = self._joint.from_motor(goal, self.motor_ranges)
        gripper = jnp.clip(q[5], self.gripper_range[0], self.gripper_range[1])
        physics, info = self._servo_actuate(physics, info, q[:5], gripper)
        return physics, info.replace(
            ik_target=self.ik_point(physics), last_action_zero=jnp.zeros((), bool),
            nonfinite_actions=info.nonfinite_actions + jnp.any(~finite).astype(jnp.int32),
        )

    def joint_goal(self, physics: PhysicsState, action: Array) -> Array:
        """The absolute motor targets (6,) a joint-mode ``action`` (6,) sets, in motor units, as
        :meth:`_joint_control` describes (what lerobot's ``send_action`` returns)."""
        mode, present = self._joint, self.motor_positions(physics)
        goal = jnp.where(jnp.isfinite(action), present + action if mode.relative else action,
                         self._motor_targets(physics))
        if mode.max_relative is not None:
            goal = present + jnp.clip(goal - present, -mode.max_relative, mode.max_relative)
        return goal

    def cartesian_as_joint(self, physics: PhysicsState, info: Info, action: Array) -> tuple[Array, Info]:
        """``(joint-mode action (6,), info)``: the motor targets a Cartesian ``action`` (4,) sets from ``info``'s
        IK target, and ``info`` with the moved target, which the caller keeps (``scripted.controller_for``)."""
        arm_q, gripper, info = self.cartesian_targets(physics, info,
                                                      self._checked_cartesian(action, physics.qpos.dtype))
        arm_q = jnp.clip(arm_q, self.ctrl_range[:, 0], self.ctrl_range[:, 1])
        goal = self._joint.to_motor(jnp.concatenate([arm_q, gripper[None]]), self.motor_ranges)
        return (goal - self.motor_positions(physics) if self._joint.relative else goal), info

    @staticmethod
    def _checked_cartesian(action: Array, dtype) -> Array:
        action = jnp.asarray(action, dtype)
        if action.shape != (4,):
            raise InputError(f"a Cartesian action must have shape (4,) = [dx, dy, dz, grasp], got {action.shape}")
        return action

    @property
    def motor_ctrl_ids(self) -> np.ndarray:
        """(6,) ctrl indices of the five arm actuators, then the gripper's."""
        return np.append(self.actuator_ids, self.gripper_actuator)

    def at_rest(self, physics: PhysicsState, q: Array) -> PhysicsState:
        """``physics`` with the six motors' joints at ``q`` (6,) rad, at rest and held there (their targets ``q``)."""
        qpos = physics.qpos.at[self.qpos_ids].set(q[:5]).at[self.gripper_qpos].set(q[5])
        return self.physics.init(qpos, jnp.zeros_like(physics.qvel), physics.ctrl.at[self.motor_ctrl_ids].set(q))

    def _servo_actuate(self, physics: PhysicsState, info: Info, arm_q: Array,
                       gripper_ctrl: Array) -> tuple[PhysicsState, Info]:
        """:meth:`actuate` the targets through the servo model (when on), its state carried in ``info.servo``."""
        if self.servo_model is None:
            return self.actuate(physics, arm_q, gripper_ctrl, info.model_params), info
        command = jnp.concatenate([jnp.clip(arm_q, self.ctrl_range[:, 0], self.ctrl_range[:, 1]), gripper_ctrl[None]])
        control_dt = self.n_substeps * float(self.model.opt.timestep)
        # N·m, for the sag
        load = self.actuator_force(physics)[self.motor_ctrl_ids] if self.servo_model.voltage_sag else None
        assert info.servo is not None  # the servo state init sets with a servo model
        target, state = servo.apply(self.servo_model, info.servo, command, self.motor_q(physics), control_dt, load)
        params = servo.sagged(self.servo_model, state, info.model_params, self.model.actuator_forcerange,
                              self.motor_ctrl_ids)
        return self.actuate(physics, target[:5], target[5], params), info.replace(servo=state)

    def actuate(self, physics: PhysicsState, arm_q: Array, gripper_ctrl: Array,
                params: dict[str, Array] | None = None) -> PhysicsState:
        """Hold arm targets ``arm_q`` (5,) rad (clipped to the ctrl ranges) and ``gripper_ctrl`` rad for
        ``n_substeps`` physics steps, with per-world model ``params`` if given."""
        arm = jnp.clip(arm_q, self.ctrl_range[:, 0], self.ctrl_range[:, 1])
        ctrl = physics.ctrl.at[self.actuator_ids].set(arm).at[self.gripper_actuator].set(gripper_ctrl)
        return self.physics.step(physics, ctrl, self.n_substeps, params)

