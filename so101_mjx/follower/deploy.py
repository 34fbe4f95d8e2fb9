"""``so101-mjx deploy POLICY``: an exported policy on a follower, through lerobot's robot API.

The robot is ``so101_follower`` (a real SO-101, through lerobot >= 0.6) or ``so101_mjx`` (the
simulated follower, :class:`~so101_mjx.follower.sim.SimFollower`; no lerobot needed). Each control
period (the policy's rate) the loop reads ``get_observation()``, builds the policy's observation
from it in the training layout (``agent_pos`` = the six ``<motor>.pos`` in the policy's units; a
pixel policy's ``front`` frame; a state policy's ``environment_state``, which only the simulator
measures), and sends the policy's targets (offsets added to the measured positions for a
relative-target policy), within the motor ranges as in training, with ``send_action``; the robot
clamps them to ``max_relative_target``.

A Cartesian-mode policy (``[dx, dy, dz, grasp]``) runs through the library's IK on the host, against
the measured joint state (:class:`~so101_mjx.follower.cartesian.CartesianAdapter`), at its own rate.

``POLICY`` may also be ``excitation``: the servo identification's trajectory
(:mod:`so101_mjx.sysid.excitation`, each motor in turn, in degrees at 30 Hz from the tasks' start pose),
whose ``dataset`` log is what ``so101-mjx sysid`` fits. With ``--robot.type so101_mjx``,
``servo_model`` runs the simulated follower under a servo model.

Safety: before the first action every arm motor must be within ``start_tolerance`` of
the pose the policy's episodes start from; a non-finite policy output stops the run before it is
sent; ``time_limit_s`` bounds the run; Ctrl-C or SIGTERM stops it. On any stop the robot is
disconnected (a real follower then disables torque, lerobot's ``disable_torque_on_disconnect``) and
the episodes run so far, the one under way included, are in the ``dataset`` log (a LeRobotDataset
v3.0: ``observation.state`` and ``action`` with the follower's feature names; :mod:`~so101_mjx.follower.deploy_log`
records the run and the episodes cut short). A ``dataset`` directory that is not new or empty is refused before the
robot connects. ``dry_run`` computes the actions and sends none.
This loop has not been run on hardware by this project.
"""

from __future__ import annotations

import contextlib
import dataclasses
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from so101_mjx import _progress
from so101_mjx._interrupts import as_interrupt, shielded, sigterm_interrupts, stop_name, stop_point
from so101_mjx.envs import registry
from so101_mjx.envs.arm import JointMode
from so101_mjx.errors import InputError, ParameterError
from so101_mjx.follower.actions import FEATURE_KEYS, as_dict, check_max_relative
from so101_mjx.follower.cartesian import CartesianAdapter
from so101_mjx.follower.deploy_log import Log, dataset_log, write_log
from so101_mjx.follower.sim import JOINT_FIELDS, SimFollower, SimFollowerConfig
from so101_mjx.robot import calibration as calib, motors
from so101_mjx.robot.scenes import load_model
from so101_mjx.sim import servo
from so101_mjx.sim.servo import ServoModel
from so101_mjx.sysid import excitation

ROBOTS = ("so101_mjx", "so101_follower")
EXCITATION, EXCITATION_TASK = "excitation", "SO101Reach-v0"  # the identification's commands, and the scene they run in


@dataclasses.dataclass(frozen=True)
class Plan:
    """What the policy at ``path`` needs: its act function, task, mode, rate and observation."""

    path: str
    act: Any
    task: str
    mode: JointMode | None  # None: a Cartesian-mode policy, through ``adapter``
    fps: int
    episode_steps: int
    image_size: int | None  # a pixel policy's frame side (px)
    task_options: dict[str, Any]
    limits: np.ndarray  # (6, 2) the motors' ranges in the policy's units
    adapter: CartesianAdapter | None = None
    task_policy: bool = True  # False: commands that read no object state and run whatever the task's outcome
    camera_specs: dict[str, Any] = dataclasses.field(default_factory=dict)  # the pixel policy's camera files, by camera
    cameras: tuple[str, ...] = ()  # the cameras a pixel policy sees
    image_quality: str = "full"  # the simulated follower's render model: a pixel policy's own (its training frames')
    ranges: np.ndarray | None = None  # (6, 2) rad: the motors' joint ranges (the units' nominal calibration)
    arm: Any = None  # the follower's own calibration (robot.calibration.Calibration) when it differs from the policy's

    @property
    def calibration(self):
        """The joint-mode policy's follower calibration (its motor units), or None."""
        return self.mode.calibration if self.mode is not None else None

    @property
    def units(self) -> str:
        """The follower's units: the joint-mode policy's, or degrees for a Cartesian one."""
        return self.mode.units if self.mode is not None else "degrees"

    def for_arm(self, calibration: Any) -> Plan:
        """This plan on a follower whose motor units follow ``calibration`` (a lerobot calibration file, or None:
        the policy's own units): readings and targets are converted through the joint angles, and the targets
        kept within that arm's calibrated limits."""
        arm = calib.parse(calibration)
        if arm is None:
            return self
        assert self.ranges is not None  # plan() and excitation_plan() set it
        return dataclasses.replace(self, arm=arm, limits=motors.motor_limits(self.ranges, self.units, arm))

    def to_policy(self, values: np.ndarray) -> np.ndarray:
        """Motor values (6,) of the follower in the policy's units (the same values without :attr:`arm`)."""
        return values if self.arm is None else self._convert(values, self.arm, self.calibration)

    def to_arm(self, values: np.ndarray) -> np.ndarray:
        """Motor values (6,) in the policy's units as the follower's (the inverse of :meth:`to_policy`)."""
        return values if self.arm is None else self._convert(values, self.calibration, self.arm)

    def _convert(self, values: np.ndarray, source: Any, target: Any) -> np.ndarray:
        """Motor values under calibration ``source`` as the same joint angles under ``target`` (None: nominal)."""
        assert self.ranges is not None  # set with arm, by for_arm
        q = motors.from_motor(values, self.ranges, self.units, source)
        return np.asarray(motors.to_motor(q, self.ranges, self.units, target), np.float64)

    def reset(self) -> None:
        """A new episode (the Cartesian adapter's history, the excitation's first command)."""
        parts: tuple[Any, ...] = (self.adapter, self.act)
        for part in parts:
            if hasattr(part, "reset"):
                part.reset()

    def observation(self, robot_obs: dict[str, Any], environment_state: np.ndarray | None) -> dict[str, Any]:
        """The policy's observation (the gym env's keys; ``motors``: the values the robot measured, ``policy_motors``:
        them in the policy's units) from the robot's."""
        measured = np.asarray([robot_obs[k] for k in FEATURE_KEYS], np.float64)
        own = self.to_policy(measured)
        agent = self.adapter.agent_pos(own) if self.adapter is not None else own.astype(np.float32)
        obs: dict[str, Any] = {"agent_pos": agent, "motors": measured, "policy_motors": own}
        if self.cameras:
            obs["pixels"] = {c: self.frame(c, robot_obs[c]) for c in self.cameras}
        else:
            obs["environment_state"] = environment_state
        return obs

    def frame(self, camera: str, frame: Any) -> np.ndarray:
        """``camera``'s frame at the policy's size (:func:`~so101_mjx.render.frames.fit_frame`)."""
        from so101_mjx.render.frames import fit_frame

        assert self.image_size is not None  # a pixel policy's (the one with cameras)
        return fit_frame(frame, self.image_size, f"the robot's {camera!r} frames ({self.path} sees them)")

    def targets(self, obs: dict[str, Any]) -> np.ndarray:
        """Absolute motor targets (6,) of the follower for ``obs`` within the motor ranges (where training's
        actuators held them); RuntimeError for a non-finite policy output."""
        action = np.asarray(self.act(obs), np.float64)
        size = 4 if self.adapter is not None else len(FEATURE_KEYS)
        if action.shape != (size,) or not np.all(np.isfinite(action)):
            raise RuntimeError(f"{self.path} produced {action}: not {size} finite values; nothing of it was sent")
        own = obs["policy_motors"]
        if self.adapter is not None:
            goal = self.adapter.targets(own, action)
        else:
            assert self.mode is not None  # None only for a Cartesian-mode policy, which has the adapter
            goal = own + action if self.mode.relative else action
        return np.clip(self.to_arm(goal), self.limits[:, 0], self.limits[:, 1])


def plan(path: str | Path) -> Plan:
    """The :class:`Plan` of an exported policy (joint or Cartesian mode), loaded by
    :func:`so101_mjx.training.policies.load`."""
    from so101_mjx.training import policies

    policy = policies.load(path)
    name, env_config = policy.env_for()
    mode = JointMode.of(env_config)
    config, fps = policy.config, policy.control_rate
    if abs(fps - round(fps)) > 1e-9:
        raise InputError(f"{path} acts every {config.control_dt} s; a follower takes a whole number of "
                         "actions per second")
    state_config = policies.without_cameras(env_config)
    options = {k: v for k, v in state_config.items() if k not in JOINT_FIELDS}
    units = mode.units if mode is not None else "degrees"
    ranges = motors.joint_ranges(load_model(registry.task(name).scene))
    limits = mode.limits(ranges) if mode is not None else motors.motor_limits(ranges, units)  # a calibration's too
    adapter = CartesianAdapter(name, state_config, units) if mode is None else None
    return Plan(str(path), policy.gym_fn, name, mode, round(fps), config.episode_length, policy.image_size, options,
                limits, adapter, camera_specs=policies.camera_files(env_config) if policy.image_size else {},
                cameras=policy.cameras, ranges=ranges,
                image_quality=env_config.get("image_quality", "fast") if policy.pixel else "full")


class Sequence:
    """Open-loop commands: row i of ``commands`` (T, 6) at the i-th call (the last one after the end)."""

    def __init__(self, commands: np.ndarray):
        self.commands, self.i = commands, 0

    def __call__(self, obs: dict[str, Any]) -> np.ndarray:
        del obs
        row = self.commands[min(self.i, len(self.commands) - 1)]
        self.i += 1
        return row

    def reset(self) -> None:
        self.i = 0


def excitation_plan(task: str = EXCITATION_TASK, fps: int = 30, units: str = "degrees") -> Plan:
    """The :class:`Plan` that sends :func:`so101_mjx.sysid.excitation.trajectory` from ``task``'s start pose."""
    config = registry.task(task).default_config()
    ranges = motors.joint_ranges(load_model(registry.task(task).scene))
    start = np.append(np.asarray(config.home_position, np.float64), 0.0)  # the gripper's start: ctrl 0
    commands = motors.to_motor(excitation.trajectory(start, ranges, fps), ranges, units)
    return Plan(EXCITATION, Sequence(commands), task, JointMode(units), fps, len(commands), None, {},
                motors.motor_limits(ranges, units), task_policy=False, ranges=ranges)


def make_robot(robot_type: str, p: Plan, *, port: str | None = None, robot_id: str | None = None,
               max_relative_target=None,
               real_time: bool = False, seed: int = 0, front_camera: str | None = None,
               wrist_camera: str | None = None):
    """The robot ``robot_type`` (:data:`ROBOTS`) set up for plan ``p`` (a real follower's cameras: ``front_camera`` and
    ``wrist_camera``, OpenCV indices or paths); ValueError naming what is wrong."""
    max_relative_target = check_max_relative(max_relative_target)
    if robot_type == "so101_mjx":
        size = p.image_size or 480
        return SimFollower(SimFollowerConfig(
            task=p.task, use_degrees=p.units == "degrees", max_relative_target=max_relative_target,
            camera_names=p.cameras, camera_height=size, camera_width=size, fps=p.fps,
            camera_specs={c: s for c, s in p.camera_specs.items() if c in p.cameras} or None,
            image_quality=p.image_quality, real_time=real_time, seed=seed, task_options=p.task_options,
            calibration=p.arm or p.calibration))
    if robot_type != "so101_follower":
        raise ParameterError(f"robot_type must be one of {ROBOTS}, got {robot_type!r}", "robot_type")
    if p.image_size is None and p.task_policy:
        raise ParameterError(f"{p.path} is a state policy of {p.task}: it observes the objects' state, which a "
                             "real follower does not measure; deploy a pixel policy there, or run it on robot_type "
                             "so101_mjx", "robot_type")
    if not port:
        raise ParameterError("port is required with robot_type so101_follower (lerobot-find-port finds it)",
                             "port", "robot_type")
    if not Path(port).exists():
        raise ParameterError(f"port {port} does not exist: connect the follower's controller board "
                             "(lerobot-find-port finds it)", "port")
    paths = {"front": front_camera, "wrist": wrist_camera}
    unknown = [c for c in p.cameras if c not in paths]
    if unknown:
        raise InputError(f"{p.path} sees cameras {unknown}; a real follower here has front and wrist cameras only")
    sources: dict[str, str] = {}
    for camera in p.cameras:
        source = paths[camera]
        if source is None:
            raise ParameterError(f"{camera}_camera (an OpenCV index or path) is required: {p.path} sees the "
                                 f"{camera} camera", f"{camera}_camera")
        sources[camera] = source
    from so101_mjx.render.camera import capture_size

    try:
        from lerobot.cameras.opencv import OpenCVCameraConfig
        from lerobot.robots import make_robot_from_config
        from lerobot.robots.so_follower import SO101FollowerConfig
    except ImportError:
        raise ParameterError("robot_type so101_follower needs lerobot >= 0.6 with its Feetech extra "
                             "(Python >= 3.12): pip install 'lerobot[feetech]>=0.6'", "robot_type") from None
    cameras = {c: OpenCVCameraConfig(index_or_path=int(sources[c]) if sources[c].isdigit() else Path(sources[c]),
                                     fps=p.fps, **capture_size(p.camera_specs.get(c))) for c in p.cameras}
    return make_robot_from_config(SO101FollowerConfig(
        port=port, id=robot_id, use_degrees=p.units == "degrees", max_relative_target=max_relative_target,
        cameras=cameras))


def start_pose(p: Plan) -> np.ndarray:
    """The six motor positions (6,) the policy's episodes start from (its task's reset)."""
    with SimFollower(SimFollowerConfig(task=p.task, use_degrees=p.units == "degrees", camera_names=(), fps=p.fps,
                                       task_options=p.task_options, calibration=p.calibration)) as sim:
        return sim.present_position()


def check_start(measured: np.ndarray, start: np.ndarray, tolerance: float, units: str) -> None:
    """ValueError listing the arm motors farther than ``tolerance`` from ``start`` (the gripper is free)."""
    far = [f"{k} at {m:.1f}, start {s:.1f}" for k, m, s in zip(FEATURE_KEYS[:5], measured[:5], start[:5], strict=True)
           if abs(m - s) > tolerance]
    if far:
        raise ParameterError(f"the arm is not at the policy's start pose (within {tolerance} {units}): "
                             f"{'; '.join(far)}. Move it there (or raise start_tolerance); nothing was sent",
                             "start_tolerance")


def run_episode(robot, p: Plan, steps: int, dry_run: bool, deadline: float, log: Log) -> bool:
    """One episode of at most ``steps`` actions (fewer when the task ends it, or at ``deadline``, a
    ``time.monotonic()``); appends it to ``log``, also when an interrupt or an error cuts it short;
    returns False when the deadline stopped it."""
    sim = robot if isinstance(robot, SimFollower) else None
    paced = sim is None  # a real follower runs at the policy's rate; the simulator paces itself (real_time)
    frames: list[tuple] = []  # one append per action: an interrupt never splits a frame
    tick, in_time, ended = time.monotonic(), True, False
    p.reset()
    shown = _progress.bar(steps, "deploy", "action")  # on a terminal: the episode's actions
    try:
        for _ in range(steps):
            stop_point()  # a stop whose first KeyboardInterrupt was lost ends the run before the next action
            robot_obs = robot.get_observation()
            env_state = sim.environment_state() if sim is not None else None
            obs = p.observation(robot_obs, env_state)
            goal = as_dict(p.targets(obs))
            sent = goal if dry_run else robot.send_action(goal)
            log.clamped += int(any(abs(sent[k] - goal[k]) > 1e-9 for k in FEATURE_KEYS))
            frames.append((obs["motors"], [sent[k] for k in FEATURE_KEYS], env_state))
            shown.update(1)
            if sim is not None and sim.terminated and p.task_policy:
                ended = True
                break
            if paced:
                tick += 1.0 / p.fps
                time.sleep(max(0.0, tick - time.monotonic()))
            if time.monotonic() >= deadline:
                in_time = False
                break
    finally:
        shown.close()
        success = bool(sim.info.get("succeed", False)) if sim is not None else False
        log.add(frames, success, cut_short=not ended and len(frames) < steps)
    return in_time


def run_episodes(robot, p: Plan, episodes: int, steps: int, dry_run: bool, deadline: float, log: Log, seed: int,
                 start: np.ndarray | None, start_tolerance: float) -> str:
    """``episodes`` episodes on the connected ``robot`` (the simulator reset to ``seed + i``; a real
    follower checked against ``start``); returns why they stopped, ``"done"`` or ``"time limit"``."""
    for episode in range(episodes):
        print(f"deploy: episode {episode + 1}/{episodes}", file=sys.stderr, flush=True)
        if isinstance(robot, SimFollower):
            robot.reset(seed + episode)
        else:
            assert start is not None  # deploy() measures it for a real follower
            measured = np.asarray([robot.get_observation()[k] for k in FEATURE_KEYS])
            check_start(measured, start, start_tolerance, p.units)
        if not run_episode(robot, p, steps, dry_run, deadline, log):
            return "time limit"
    return "done"


def deploy(path: str | Path, robot_type: str = "so101_mjx", *, episodes: int = 1, episode_time_s: float | None = None,
           time_limit_s: float | None = None, dry_run: bool = False, start_tolerance: float = 10.0,
           dataset: str | None = None, seed: int = 0, servo_model: ServoModel | dict | None = None,
           calibration: Any = None, **robot_options: Any) -> dict[str, Any]:
    """Run ``episodes`` episodes of the policy at ``path`` (or :data:`EXCITATION`) on the robot; print and
    return a summary (``success_rate`` counts the simulator's task success; a real follower reports none;
    ``stopped``: ``done``, ``time limit``, ``Ctrl-C`` or ``SIGTERM``; ``cut_short``: episodes stopped early).
    ``servo_model``: a :class:`~so101_mjx.sim.servo.ServoModel` (or its fields) for the simulated follower
    (``so101_mjx`` only), checked before anything starts; ``calibration``: the
    follower's lerobot calibration when its units differ from the policy's (:meth:`Plan.for_arm`; the simulated
    follower then takes these units)."""
    from so101_mjx.training.policies import label

    p = (excitation_plan() if str(path) == EXCITATION else plan(path)).for_arm(calibration)
    if servo_model is not None:
        if robot_type != "so101_mjx":
            raise ParameterError("servo_model applies to robot_type so101_mjx (the simulated follower); a real one "
                                 "has its own servos", "servo_model", "robot_type")
        p = dataclasses.replace(p, task_options={**p.task_options, "servo_model": servo.parse(servo_model)})
    steps = p.episode_steps if episode_time_s is None else max(1, round(episode_time_s * p.fps))
    robot = make_robot(robot_type, p, seed=seed, **robot_options)
    start = p.to_arm(start_pose(p)) if not isinstance(robot, SimFollower) else None
    log, stopped = Log(), "error"
    deadline = time.monotonic() + (float("inf") if time_limit_s is None else time_limit_s)
    with contextlib.ExitStack() as stack, sigterm_interrupts():
        writer = (None if dataset is None
                  else stack.enter_context(dataset_log(dataset, p, robot_type, isinstance(robot, SimFollower))))
        try:
            robot.connect()
            print(f"deploy: {label(path)} on {robot_type}, {episodes} episodes of up to {steps} actions; "
                  "Ctrl-C stops it",
                  file=sys.stderr, flush=True)
            stopped = run_episodes(robot, p, episodes, steps, dry_run, deadline, log, seed, start, start_tolerance)
        except BaseException as err:  # Ctrl-C or SIGTERM, also when JAX wrapped it (as_interrupt)
            stop = as_interrupt(err)
            if stop is None:
                raise
            stopped = stop_name(stop)
        finally:
            with shielded("disconnecting the robot and writing the log"):
                if robot.is_connected:
                    robot.disconnect()  # a real follower disables torque
                    print(f"deploy: {robot_type} disconnected", file=sys.stderr, flush=True)
                if writer is not None:
                    write_log(writer, log, p, stopped)
    sim = robot_type == "so101_mjx" and p.task_policy  # the excitation has no task outcome
    result = {"episodes": len(log.episodes), "stopped": stopped, "cut_short": sum(log.cut_short),
              "clamped_actions": log.clamped,
              "success_rate": float(np.mean(log.successes)) if sim and log.episodes else None}
    rate = (f"success rate {result['success_rate']:.3f} ({sum(log.successes)}/{len(log.episodes)})" if sim
            else "success not measured")
    print(f"deploy {label(path)} on {robot_type} ({p.task}, {p.fps} Hz, "
          f"{p.units}{', dry run' if dry_run else ''}): {len(log.episodes)} episodes ({result['cut_short']} cut "
          f"short), {rate}, {log.clamped} actions clamped by the robot; stopped: {stopped}"
          + (f"; logged to {dataset}" if dataset is not None and log.episodes else ""))
    return result
