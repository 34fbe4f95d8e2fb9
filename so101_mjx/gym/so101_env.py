"""The SO-101 robot base env: Cartesian position control through the functional env's arm.

:class:`SO101GymEnv` is lerobot_env_so101 0.4.0's base class of the same name: the native action
``[dx, dy, dz, grasp]``, ``reset_robot``, ``apply_action``, ``get_robot_state``,
``get_gripper_pose``, ``ik_point_pos`` and the reference's private attributes. It steps ONE world
of a functional env (:mod:`so101_mjx.envs`) on backend ``c``, jitted once per instance: IK,
physics and the task's bookkeeping are that code. Instantiated directly it is the robot-only env
(the reference's pick scene, no task: like the reference, ``reset()`` only seeds and ``step()`` is
not implemented); the task envs (:mod:`so101_mjx.gym.task_env`) subclass it.

The IK target is updated here, as the reference's ``apply_action`` does, with this env's
``cartesian_bounds`` and ``action_scale``; the functional arm then holds that target.
``home_position`` and ``cartesian_bounds`` are the functional env's config fields
(:class:`~so101_mjx.envs.config.ArmConfig`), so a policy trained with them meets the same ones here.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
from gymnasium import spaces

from so101_mjx import _checks as checks
from so101_mjx.envs import arm as arm_module
from so101_mjx.envs.base import SO101Env, as_qpos0
from so101_mjx.envs.config import ArmConfig
from so101_mjx.errors import InputError
from so101_mjx.gym.compiled import compiled
from so101_mjx.gym.mujoco_env import CAMERA, RENDER_MODES, GymRenderingSpec, MujocoGymEnv
from so101_mjx.ik import iterative as ik
from so101_mjx.robot.gripper import ctrl_to_gripper_pose
from so101_mjx.robot.scenes import ARM_JOINTS, EE_SITE
from so101_mjx.sim.state import State

HOME_POSITION = np.asarray(arm_module.HOME_POSITION, np.float64)  # (5,) rad, the arm's reset pose
CARTESIAN_BOUNDS = np.asarray(arm_module.CARTESIAN_BOUNDS, np.float64)  # (2, 3) m, min and max of the IK target
ROLL = ik.ROLL_JOINT


class ArmOnly(SO101Env):
    """The robot-only functional env behind a bare :class:`SO101GymEnv`: the pick scene, no task
    (no observation entries, reward 0, never succeeds). Not registered."""

    name = "SO101Arm"
    instruction = "Move the arm."
    config_class = ArmConfig
    scene = "pick_cube"
    observation_layout = ()

    def sample_initial(self, rng, dtype) -> dict:
        return {}

    def reset_to(self, rng) -> State:  # type: ignore[override]
        return self.start(rng, as_qpos0(self.mj_model, jnp.result_type(float)), None, lambda physics: {})

    def task_observation(self, physics, info) -> dict:
        return {}

    def success(self, physics, info):
        return jnp.zeros((), bool)

    def reward_weights(self) -> dict:
        return {}

    def reward_terms(self, physics, info, success) -> dict:
        return {}


def check_action_scale(value: Any) -> float:
    """A finite positive ``action_scale`` (metres per unit action), as the reference: no upper bound."""
    scale = checks.real("action_scale", value)
    if not scale > 0:
        raise InputError(f"action_scale must be positive, got {value!r}")
    return scale


class SO101GymEnv(MujocoGymEnv):
    """SO-101 base env: 4-dim Cartesian position control (the reference's ``SO101GymEnv``).

    Args (the reference's, with its defaults):
        xml_path: MJCF scene; None = the task's scene (the robot-only env: the pick scene).
        seed: seeds :attr:`random_state`.
        control_dt, physics_dt: seconds per control step and per physics step.
        render_spec: frame size and camera of :meth:`render` and of ``pixels.front``.
        render_mode: ``"rgb_array"`` or ``"human"`` (MuJoCo's passive viewer, synced every step).
        image_obs: add ``pixels.front`` to the observation.
        home_position: (5,) arm joint angles [rad] :meth:`reset_robot` applies.
        cartesian_bounds: (2, 3) min / max of the IK target [m], clipped every step.
        action_scale: metres per unit of position action; must be positive (and finite).
        top_down_ik: IK of the grasp point with the gripper pointing down.
        jaw_pads: collide the fingertip pads.

    ValueError (InputError) naming an invalid argument.
    """

    metadata = {"render_modes": list(RENDER_MODES), "render_fps": 10}
    _default_camera: str | int = CAMERA
    _state: State  # the functional env's current state (:meth:`_set_state`)

    def __init__(self, xml_path: str | Path | None = None, seed: int = 0, control_dt: float = 0.02,
                 physics_dt: float = 0.002,
                 render_spec: GymRenderingSpec = GymRenderingSpec(), render_mode: str = "rgb_array",  # noqa: B008
                 image_obs: bool = False, home_position=HOME_POSITION, cartesian_bounds=CARTESIAN_BOUNDS,
                 action_scale: float = 1.0, top_down_ik: bool = False, jaw_pads: bool = False):
        config = dict(control_dt=control_dt, physics_dt=physics_dt, action_scale=action_scale, top_down_ik=top_down_ik,
                      jaw_pads=jaw_pads)
        self._setup(ArmOnly, xml_path, seed, render_spec, render_mode, image_obs, home_position,
                    cartesian_bounds, config)
        spec = self._render_specs
        base: dict[str, spaces.Space] = {"agent_pos": spaces.Dict({
            "tcp_pose": spaces.Box(-np.inf, np.inf, shape=(7,), dtype=np.float32),
            "tcp_vel": spaces.Box(-np.inf, np.inf, shape=(6,), dtype=np.float32),
            "gripper_pose": spaces.Box(-1, 1, shape=(1,), dtype=np.float32),
        })}
        if self.image_obs:
            front = spaces.Box(0, 255, (spec.height, spec.width, 3), np.uint8)
            base["pixels"] = spaces.Dict({CAMERA: front})
        self.observation_space = spaces.Dict(base)

    def _setup(self, task: type[SO101Env], xml_path, seed, render_spec, render_mode, image_obs, home_position,
               cartesian_bounds, config: dict[str, Any]) -> None:
        """Validate the arguments, build the functional env and its jitted functions, reset it."""
        if render_mode not in RENDER_MODES:
            raise InputError(f"render_mode must be one of {list(RENDER_MODES)}, got {render_mode!r}")
        image_obs = checks.flag("image_obs", image_obs)
        scale = check_action_scale(config.get("action_scale", task.default_config().action_scale))
        config["action_scale"] = scale  # unused by the control here: the IK target is updated below
        config.update(home_position=home_position, cartesian_bounds=cartesian_bounds)  # checked by the env's config
        checks.integer("seed", seed, ge=0, le=2**32 - 1)
        self._compiled = compiled(task, xml_path, config)
        self.env = self._compiled.env
        cfg = self.env.config
        super().__init__(xml_path, seed, *cfg.periods(), render_spec,
                         model=copy.copy(self.env.mj_model))
        self.render_mode, self.image_obs = render_mode, image_obs
        self.metadata = {**self.metadata, "render_fps": int(np.round(1.0 / self.control_dt))}
        self._home_position, self._cartesian_bounds = np.asarray(cfg.home_position), np.asarray(cfg.cartesian_bounds)
        self._action_scale = scale
        self._top_down_ik = cfg.top_down_ik
        self._dtype = jnp.result_type(float)  # float64 under jax_enable_x64, else float32
        self._set_state(self._compiled.reset(jax.random.PRNGKey(seed)))
        low, high = self.env.arm.action_bounds()  # joint mode (control_mode="joint"): the six motors' targets
        self.action_space = spaces.Box(low.astype(np.float32), high.astype(np.float32), dtype=np.float32)

    # -- the reference's robot methods ---------------------------------------------------------------
    def reset_robot(self) -> None:
        """Arm joints and their position targets to ``home_position``, kinematics updated, and the IK
        target re-read from :attr:`ik_point_pos` (the reference's ``reset_robot``)."""
        data = self.data
        data.qpos[self.env.arm.qpos_ids] = self._home_position
        data.ctrl[self._arm_ctrl_ids] = self._home_position
        mujoco.mj_forward(self._model, data)
        self._target_ee_pos = self.ik_point_pos
        self._last_action_was_zero = False

    def apply_action(self, action) -> None:
        """One control step with ``action`` (4,) = [dx, dy, dz, grasp]: the IK target moves by
        ``action_scale`` metres per unit (a near-zero delta, ‖a[:3]‖ < 1e-6, holds the current pose),
        clipped to ``cartesian_bounds``; ``grasp`` in [0, 1] (0 closed) is the jaw command; one IK,
        then ``control_dt // physics_dt`` physics steps. ValueError for another shape or non-real values.
        In joint mode (``control_mode="joint"``): six motor targets (:mod:`so101_mjx.robot.motors`)."""
        if self._compiled.joint_step is not None:  # joint mode: motor targets straight to the functional step
            action = checks.real_array("action", action, (6,), layout=f" = {self.env.arm.action_layout}")
            self._read_back()
            self._set_state(self._compiled.joint_step(self._state, jnp.asarray(action, self._dtype)))
            if self.render_mode == "human":
                self._sync_viewer()
            return
        action = checks.real_array("action", action, (4,), layout=" = [dx, dy, dz, grasp]")
        self._read_back()
        scale, bounds = jnp.asarray(self._action_scale, self._dtype), jnp.asarray(self._cartesian_bounds, self._dtype)
        self._set_state(self._compiled.control_step(self._state, jnp.asarray(action, self._dtype), scale, bounds))
        if self.render_mode == "human":
            self._sync_viewer()

    def get_robot_state(self) -> np.ndarray:
        """(14,) [arm qpos (5), arm qvel (5), gripper_pose, ee_pos (3)], as the reference (float64;
        ee_pos is the ``so101/ee_pos`` sensor, one physics step stale after a step)."""
        self._read_back()
        agent = np.asarray(self._compiled.agent_pos(self._state.physics))
        return np.concatenate([agent[:10].astype(np.float32), self.get_gripper_pose(), agent[11:].astype(np.float64)])

    def get_gripper_pose(self) -> np.ndarray:
        """(1,) float32: the gripper ctrl target mapped to [-1, 1] (-1 closed, +1 open)."""
        self._read_back()
        ctrl = np.float64(self._state.physics.ctrl[self._gripper_ctrl_id])
        return np.asarray([ctrl_to_gripper_pose(ctrl, self.env.arm.gripper_range)], np.float32)

    @property
    def ik_point_pos(self) -> np.ndarray:
        """World position (3,) of the point the action moves (grasp point with ``top_down_ik``)."""
        self._read_back()
        return np.asarray(self._compiled.ik_point(self._state.physics), np.float64)

    def _top_down_seed(self) -> np.ndarray:
        """(5,) current arm angles with wrist_roll turned so the jaws close along world y (the top-down IK's seed)."""
        self._read_back()
        a, physics = self.env.arm, self._state.physics
        seed = ik.top_down_seed(a.kin, a.joint_q(physics), a.joint_lower, a.joint_upper,
                                frames_q=physics.kin_qpos[a.qpos_ids])
        return np.asarray(seed, np.float64)

    # -- the reference's private attributes -------------------------------------------------------------
    @property
    def _target_ee_pos(self) -> np.ndarray:
        """The Cartesian IK target (3,) world metres; settable, as the reference's attribute."""
        return np.asarray(self._state.info.ik_target, np.float64)

    @_target_ee_pos.setter
    def _target_ee_pos(self, value) -> None:
        target = checks.real_array("_target_ee_pos", value, (3,), finite=True, layout=" (world metres)")
        self._state = self._state.replace(info=self._state.info.replace(ik_target=jnp.asarray(target, self._dtype)))

    @property
    def _last_action_was_zero(self) -> bool:
        """Whether the last action's delta was zero (the next zero delta then keeps the target); settable."""
        return bool(self._state.info.last_action_zero)

    @_last_action_was_zero.setter
    def _last_action_was_zero(self, value) -> None:
        flag = jnp.asarray(checks.flag("_last_action_was_zero", value))
        self._state = self._state.replace(info=self._state.info.replace(last_action_zero=flag))

    @property
    def _gripper_ctrl_id(self) -> int:
        return int(self.env.arm.gripper_actuator)

    @property
    def _arm_ctrl_ids(self) -> np.ndarray:
        return np.asarray(self.env.arm.actuator_ids)

    @property
    def _arm_dof_ids(self) -> np.ndarray:
        """The arm joints' ids (the reference indexes qpos with them: hinge ids equal qpos addresses here)."""
        return np.asarray([self._model.joint(n).id for n in ARM_JOINTS])

    @property
    def _ee_site_id(self) -> int:
        return int(self._model.site(EE_SITE).id)

    @property
    def _roll_joint_id(self) -> int:
        return int(self._model.joint(ROLL).id)

    @property
    def _roll_index(self) -> int:
        return ARM_JOINTS.index(ROLL)

    @property
    def _ik_point_offset(self) -> np.ndarray | None:
        """(3,) the controlled point in the ``gripperframe`` frame with ``top_down_ik``, else None."""
        offset = self.env.arm.ik_offset
        return None if offset is None else np.asarray(offset, np.float64)

    @property
    def _camera_id(self) -> int:
        """Id of the ``front`` camera (-1 when the scene has none)."""
        return int(mujoco.mj_name2id(self._model, mujoco.mjtObj.mjOBJ_CAMERA, CAMERA))

    # -- the functional state and the writable MjData -----------------------------------------------------
    @property
    def state(self) -> State:
        """The functional env's current state."""
        return self._state

    @property
    def data(self) -> mujoco.MjData:
        """The current state as a ``MjData``, written after every reset and step; writable, as the reference's.

        ``qpos``, ``qvel``, ``ctrl``, ``qacc_warmstart``, ``time`` and ``sensordata`` are the state's;
        frames, contacts and sensors are where the last physics step evaluated them (at
        ``state.physics.kin_qpos``), as a ``MjData`` holds them after ``mj_step``. The same
        object is kept, so a reference to it taken earlier (the reference's ``env._data``) stays
        current. Edits of ``qpos``, ``qvel``, ``ctrl``, ``qacc_warmstart`` or ``time`` reach the
        simulation on the next step (or any method reading the state), which reads them back into
        :attr:`state` (sensors re-evaluated with ``mj_forward``); other fields (mocap, act) are not
        part of the functional state.
        """
        return self._mjdata

    def _set_state(self, state: State) -> None:
        """Make ``state`` current and write it into :attr:`data`."""
        self._state = state
        p, d = state.physics, self._mjdata
        d.qpos[:], d.qvel[:], d.ctrl[:] = p.kin_qpos, p.qvel, p.ctrl
        mujoco.mj_forward(self._model, d)  # frames where the last physics step evaluated them, as after mj_step
        d.qpos[:], d.qacc_warmstart[:], d.sensordata[:], d.time = p.qpos, p.qacc_warmstart, p.sensordata, float(p.time)
        self._synced = self._data_fields()

    def _data_fields(self) -> tuple[np.ndarray, ...]:
        d = self._mjdata
        return tuple(np.array(x, copy=True) for x in (d.qpos, d.qvel, d.ctrl, d.qacc_warmstart, d.time))

    def _read_back(self) -> None:
        """Copy edits of :attr:`data` made since it was last written back into :attr:`state`."""
        if all(np.array_equal(a, b) for a, b in zip(self._data_fields(), self._synced)):
            return
        d, dtype = self._mjdata, self._dtype
        mujoco.mj_forward(self._model, d)
        qpos = jnp.asarray(d.qpos, dtype)
        physics = self._state.physics.replace(
            qpos=qpos, qvel=jnp.asarray(d.qvel, dtype), ctrl=jnp.asarray(d.ctrl, dtype),
            qacc_warmstart=jnp.asarray(d.qacc_warmstart, dtype), time=jnp.asarray(d.time, dtype),
            sensordata=jnp.asarray(d.sensordata, dtype), kin_qpos=qpos,
        )
        self._state = self._state.replace(physics=physics)
        self._synced = self._data_fields()
