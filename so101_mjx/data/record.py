"""``so101-mjx record``: demonstrations as a LeRobotDataset v3.0, without torch or lerobot.

Episodes run as batched jitted worlds (``--num-envs`` at a time, each until its first ``done`` or
the env's ``episode_length``), driven by the scripted controller or an exported policy (its
weights inside jit, :func:`so101_mjx.training.policy.forward`). Frame ``t`` holds the observation before
action ``t`` (``observation.state`` = agent_pos, ``observation.environment_state`` = the rest of the
flat observation, ``observation.images.<camera>`` rendered on MuJoCo C as the gym env's
``render()``: same camera, same markers), the action, and what the step returned:
``next.reward``, ``next.success`` (the env's success after the step) and ``next.done`` (true on the
episode's last frame: terminated, or truncated at ``episode_length``). An episode succeeded when
its last frame's ``next.success`` is true. The format is :mod:`so101_mjx.data.lerobot_dataset`'s.

Attempt ``i`` of seed ``s`` starts from ``fold_in(PRNGKey(s), i)``; ``meta/so101_mjx.json`` records
each run (env, config, policy, seed, attempts tried, episodes kept), and ``--resume`` with a seed
used before continues its attempts instead of repeating them.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from so101_mjx import _checks as checks, _progress as progress, _schema as schema
from so101_mjx._interrupts import sigterm_interrupts, stop_point
from so101_mjx._lock import exclusive
from so101_mjx.envs import make, scripted
from so101_mjx.envs.base import SO101Env
from so101_mjx.envs.registry import canonical, names as task_names, task
from so101_mjx.envs.rollout import CHUNK_STEPS, check_memory, policy_fns, task_config
from so101_mjx.errors import InputError, ParameterError
from so101_mjx.render import visual_randomization
from so101_mjx.render.batch import camera_names
from so101_mjx.render.visual_randomization import VisualRandomization
from so101_mjx.robot.motors import FEATURE_NAMES
from so101_mjx.robot.scenes import ARM_JOINTS, fit_offscreen

ROBOT_TYPE = "so101"
VISUAL_STREAM = 0x715A  # folded into the seed's key: the visual draws' own stream
IMAGE_SIZES = (16, 8192)  # px: the frame sides record accepts (even)
STATE_NAMES = [*(f"{j}.pos" for j in ARM_JOINTS), *(f"{j}.vel" for j in ARM_JOINTS), "gripper.pose", "ee.x",
               "ee.y", "ee.z"]
# joint mode (control_mode="joint"): observation.state and action as a real so101_follower's, "<motor>.pos"
FOLLOWER_NAMES = list(FEATURE_NAMES)


def environment_state_names(env_name: str) -> list[str]:
    """Feature names of ``observation.environment_state`` from the task's observation layout:
    ``block_pos.x``, ... for 3-vectors, ``<entry>.<i>`` otherwise (spaces and ``-`` spelled out)."""
    out = []
    for entry, size in task(env_name).observation_layout:
        entry = entry.replace(" - ", "_minus_").replace(" ", "_")
        out += [f"{entry}.{axis}" for axis in ("xyz" if size == 3 else range(size))]
    return out
ACTION_NAMES = ["delta_x", "delta_y", "delta_z", "gripper"]
PROVENANCE = "meta/so101_mjx.json"


def _dataset_module():
    """:mod:`so101_mjx.data.lerobot_dataset`, or a ValueError naming what to install when pyarrow is missing."""
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        raise InputError("so101-mjx record needs pyarrow: pip install pyarrow (or so101-mjx[dataset])") from None
    from so101_mjx.data import lerobot_dataset

    return lerobot_dataset


SCRIPTED = ("scripted", "demonstrator")  # policy names of the tasks' own controllers


def policy_and_env(policy: str, env_name: str | None, backend: str | None, config: dict[str, Any]):
    """``(env name, env, policy for rollout.policy_fns, its description)``: ``"scripted"`` or
    ``"demonstrator"`` (:meth:`~so101_mjx.envs.base.SO101Env.demonstrator`: PickCube's lifts) in the
    scripted controllers' config (``env_name`` required), or an exported .onnx / .npz
    (:func:`so101_mjx.training.policies.load`) in its own env and config (ValueError when ``env_name``
    names another env)."""
    if policy in SCRIPTED:
        if env_name is None:
            raise ParameterError(f"env is required with policy {policy!r} (one of {task_names()})", "env", "policy")
        name = canonical(env_name)
        scripted_config = task_config(name, scripted.DEFAULT_ACTION_SCALE, True, policy)
        env = make(name, backend=backend, **{**scripted_config, **config})
        return name, env, policy, policy
    if Path(policy).suffix not in (".onnx", ".npz"):
        raise ParameterError(f"policy must be one of {SCRIPTED} or an exported .onnx / .npz file, got {policy!r}",
                             "policy")
    from so101_mjx.training import policies

    loaded = policies.load(policy).require_state("record")
    name, _ = loaded.env_for(env_name)  # its own env: another one is refused
    mode = loaded.control_mode
    if config.get("control_mode", mode) != mode:
        raise ParameterError(f"{policy} acts in {mode!r} control mode; it cannot record in {config['control_mode']!r} "
                             "(control_mode applies to the scripted policies)", "control_mode")
    return name, loaded.make_env(backend, **config), loaded.jax_fn, str(Path(policy).resolve())


def _check_cameras(env: SO101Env, cameras: list[str], specs: dict[str, Any] | None) -> None:
    names = camera_names(env.mj_model)
    unknown = [c for c in cameras if c not in names]
    if unknown or not cameras or len(set(cameras)) != len(cameras):
        raise ParameterError(f"cameras must be distinct camera names of {type(env).__name__}: {names}, got {cameras}",
                             "cameras")
    unrecorded = sorted(set(specs or {}) - set(cameras))
    if unrecorded:
        raise ParameterError(f"camera_specs for {unrecorded}, which is not recorded (cameras {','.join(cameras)})",
                             "camera_specs", "cameras")


def _check_sizes(episodes: int, num_envs: int, max_tries: int, image_size: int | None) -> None:
    """ParameterError naming the first count below 1, an odd or out-of-range ``image_size``, or a video without
    its encoder."""
    for name, value in (("episodes", episodes), ("num_envs", num_envs), ("max_tries", max_tries)):
        if not isinstance(value, int) or value < 1:
            raise ParameterError(f"{name} must be an integer >= 1, got {value!r}", name)
    if image_size is None:
        return
    if not isinstance(image_size, int) or image_size % 2 or not IMAGE_SIZES[0] <= image_size <= IMAGE_SIZES[1]:
        raise ParameterError(f"image_size must be an even integer in [{IMAGE_SIZES[0]}, {IMAGE_SIZES[1]}] pixels, "
                             f"got {image_size!r}", "image_size")
    if importlib.util.find_spec("imageio_ffmpeg") is None:
        raise ParameterError("recording video needs imageio-ffmpeg: pip install imageio-ffmpeg (or so101-mjx[viz]), "
                             "or pass image_size=None", "image_size=None")


def _check_memory(env: SO101Env, worlds: int, image_size: int | None, cameras: int) -> None:
    """ParameterError naming the parameter when its arrays would not fit the machine's memory: the worlds' episodes
    (:func:`~so101_mjx.envs.rollout.check_memory`), and one episode's frames twice (the render workers'
    shares and the frames handed to the video encoder)."""
    check_memory(env, worlds, env.episode_length, True, f"num_envs {worlds}", ("num_envs",))
    if image_size:
        frames = env.episode_length * cameras
        checks.fits_memory(f"image_size {image_size}", 2 * frames * 3 * image_size**2,
                           f"an episode's {frames} frames of {image_size}x{image_size}x3 bytes, twice",
                           parameters=("image_size",))


def state_and_action_names(env: SO101Env) -> tuple[list[str], list[str]]:
    """Feature names of ``observation.state`` and ``action``: the Cartesian mode's, or in joint mode the
    follower's (``shoulder_pan.pos``, ..., ``gripper.pos`` for both)."""
    return (STATE_NAMES, ACTION_NAMES) if env.arm.joint_mode is None else (FOLLOWER_NAMES, FOLLOWER_NAMES)


def features(env: SO101Env, image_size: int | None, cameras: list[str], fps: int, dataset) -> dict[str, dict]:
    """The recorded features (lerobot's five defaults excluded)."""
    env_names = environment_state_names(env.name)
    state_names, action_names = state_and_action_names(env)
    if env.obs_size() != len(state_names) + len(env_names):
        raise InputError(f"{env.name}: observation size {env.obs_size()}, expected {len(state_names)} + "
                         f"{len(env_names)}")
    vector = lambda names: {"dtype": "float32", "shape": [len(names)], "names": names}  # noqa: E731
    scalar = lambda dtype: {"dtype": dtype, "shape": [1], "names": None}  # noqa: E731
    images = {f"observation.images.{c}": dataset.video_feature(image_size, image_size, fps)
              for c in (cameras if image_size else ())}
    return images | {
        "observation.state": vector(state_names), "observation.environment_state": vector(env_names),
        "action": vector(action_names),
        "next.reward": scalar("float32"), "next.done": scalar("bool"), "next.success": scalar("bool"),
    }


def read_provenance(path: Path) -> list[dict[str, Any]]:
    """The ``runs`` of ``meta/so101_mjx.json``, each checked for the ``seed`` and ``tried`` a resume
    continues from; ValueError naming the file and the field otherwise."""
    runs = schema.fields(path, schema.read_json(path), {"runs": schema.list_of(schema.OBJECT)})["runs"]
    for i, run in enumerate(runs):
        schema.fields(path, run, {"seed": schema.integer(0), "tried": schema.integer(0)}, where=f"runs[{i}].")
    return runs


def _episode_fns(env: SO101Env, policy):
    """Jitted batched ``start(keys (B, 2)) -> carry`` and ``advance(carry, keys) -> (carry, per-step
    outputs (B, CHUNK_STEPS, ...))``: observation, qpos and markers before each step, its action,
    reward, done and success after it."""
    init, act = policy_fns(env, policy)
    if env.arm.joint_mode is None:
        sent = lambda state, action: action  # noqa: E731
    else:  # the absolute targets sent (a follower's action), within the motors' ranges
        low, high = env.arm.joint_mode.limits(env.arm.motor_ranges).T

        def sent(state, action):
            goal = env.arm.joint_goal(state.physics, action)
            return jnp.clip(goal, jnp.asarray(low, goal.dtype), jnp.asarray(high, goal.dtype))

    def start(key):
        state = env.reset(jax.random.fold_in(key, 0))
        return state, init(state), jnp.zeros((), bool)

    def advance(carry, key):
        def body(c, k):
            state, cs, ended = c
            cs, action = act(cs, state, k)
            after = env.step(state, action)
            out = {"obs": state.obs, "qpos": state.physics.qpos, "markers": env.marker_positions(state.info),
                   "action": sent(state, action),
                   "reward": after.reward, "done": after.done > 0, "success": after.metrics["success"] > 0}
            return (after, cs, ended | (after.done > 0)), out

        return jax.lax.scan(body, carry, jax.random.split(key, CHUNK_STEPS))

    return jax.jit(jax.vmap(start)), jax.jit(jax.vmap(advance))


def run_worlds(env: SO101Env, fns, keys: jax.Array) -> dict[str, np.ndarray]:
    """One episode per key: per-step outputs (B, T, ...) scanned in chunks until every episode is
    done or ``episode_length`` steps have run, and ``length`` (B,) (through the first done)."""
    start, advance = fns
    carry, chunks = start(keys), []
    for i in range(0, env.episode_length, CHUNK_STEPS):
        carry, out = advance(carry, jax.vmap(jax.random.fold_in, (0, None))(keys, i // CHUNK_STEPS + 1))
        chunks.append(jax.device_get(out))
        if bool(np.all(carry[2])):
            break
    steps = min(env.episode_length, CHUNK_STEPS * len(chunks))
    out = jax.tree.map(lambda *xs: np.concatenate(xs, axis=1)[:, :steps], *chunks)
    done = out["done"]
    out["length"] = np.where(done.any(1), done.argmax(1) + 1, steps)
    return out


def _episode(out: dict[str, np.ndarray], world: int, state_size: int) -> dict[str, np.ndarray]:
    """World ``world``'s frames as the dataset's per-frame features (``state_size``: agent_pos's)."""
    t = out["length"][world]
    obs = out["obs"][world, :t]
    return {"observation.state": obs[:, :state_size], "observation.environment_state": obs[:, state_size:],
            "action": out["action"][world, :t], "next.reward": out["reward"][world, :t],
            "next.done": np.arange(t) == t - 1, "next.success": out["success"][world, :t]}


class _Frames:
    """One :class:`~so101_mjx.render.batch.BatchRenderer` per camera (``quality``'s render model); an
    episode's frames are rendered as one batch on the CPU threads, with one draw of ``visual``
    (:mod:`so101_mjx.render.visual_randomization`) per episode when given. ``specs``: camera files
    (:class:`~so101_mjx.render.camera.CameraSpec`) by camera, their pose, lens and frame latency applied."""

    def __init__(self, env: SO101Env, size: int, cameras: list[str], quality: str = "fast",
                 visual: VisualRandomization | None = None, specs: dict[str, Any] | None = None):
        from so101_mjx.render.batch import BatchRenderer, render_model

        model = render_model(env.scene, quality, visual=visual)
        fit_offscreen(model, size, size)
        self.model, self.visual, self.markers = model, visual, tuple(env.markers)
        self.specs = specs or {}
        self.renderers = {c: BatchRenderer(model, size, size, c, markers=self.markers, spec=self.specs.get(c))
                          for c in cameras}

    def episode(self, out: dict[str, np.ndarray], world: int, key: jax.Array | None = None) -> dict[str, np.ndarray]:
        """(T, size, size, 3) uint8 frames per camera of world ``world``'s episode; ``key``: its visual draw."""
        t = out["length"][world]
        qpos = out["qpos"][world, :t]
        markers = np.stack([out["markers"][site][world, :t] for site in self.markers], axis=1) if self.markers else None
        params = None
        if self.visual is not None:
            assert key is not None  # a visual draw needs its key (record() passes one)
            draw = jax.device_get(visual_randomization.sample(self.model, self.visual, key, jnp.float32))
            params = {k: np.broadcast_to(v, (t, *v.shape)) for k, v in visual_randomization.model_arrays(draw).items()}
        frames = {c: r.render(qpos, markers, params) for c, r in self.renderers.items()}
        if self.visual is not None and self.visual.image_effects:  # as the jitted env draws them
            effects = jax.vmap(visual_randomization.apply_image, in_axes=(0, None, 0))
            salts = jax.vmap(visual_randomization.state_salt, (0, None))
            frames = {c: np.asarray(effects(jnp.asarray(f), draw, salts(jnp.asarray(qpos), i)))
                      for i, (c, f) in enumerate(frames.items())}
        # a camera's latency: step t shows the frame of step t - latency (the first frame before that)
        delay = {c: self.specs[c].latency if c in self.specs else 0 for c in frames}
        return {f"observation.images.{c}": f[np.maximum(np.arange(t) - delay[c], 0)] if delay[c] else f
                for c, f in frames.items()}

    def close(self) -> None:
        for renderer in self.renderers.values():
            renderer.close()


def record(
    env: str | None, policy: str, episodes: int, out: str | Path, backend: str | None = None,
    image_size: int | None = 128,
    cameras: Sequence[str] = ("front",), only_success: bool = False, fps: int | None = None, seed: int = 0,
    resume: bool = False, num_envs: int = 64, max_tries: int | None = None, config: dict[str, Any] | None = None,
    image_quality: str = "shadowed", visual: VisualRandomization | dict | str | None = None, repair: bool = False,
    camera_specs: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Record ``episodes`` episodes into the dataset at ``out`` (appended with ``resume``).

    ``image_size`` None records no video; ``only_success`` keeps successful episodes only, trying
    at most ``max_tries`` (default 10 x ``episodes``); ``fps`` must be the env's control rate;
    ``config`` overrides env config fields; ``image_quality`` picks the camera's render model
    (:func:`so101_mjx.render.batch.render_model`: ``fast`` or ``full``, the reference's look); ``visual``
    randomizes each episode's lighting, colours and camera pose (:mod:`so101_mjx.render.visual_randomization`;
    ``camera_specs`` gives cameras their files' pose, lens and latency, :mod:`so101_mjx.render.camera`;
    the draw follows from ``seed`` and the episode's attempt number); ``repair`` first rewrites the dataset
    at ``out`` to its intact episodes, renumbered (:func:`so101_mjx.data.dataset_repair.repair`; refused,
    unchanged, when none is intact) and implies ``resume``. The episodes of each batch of ``num_envs``
    worlds are committed together (:class:`~so101_mjx.data.lerobot_dataset.DatasetWriter`); an interrupt (Ctrl-C,
    SIGTERM) commits the complete episodes of the batch under way, a kill loses them and nothing else. Returns
    ``tried``, ``kept``, ``successes``, ``frames``, ``seconds`` and the dataset's ``total_episodes``. ValueError
    names a bad argument.
    """
    dataset = _dataset_module()
    resume = resume or repair
    cameras = list(cameras)
    visual = visual_randomization.parse(visual)
    _check_sizes(episodes, num_envs, 1 if max_tries is None else max_tries, image_size)
    name, jax_env, fn, source = policy_and_env(policy, env, backend, dict(config or {}))
    if image_size is not None:
        _check_cameras(jax_env, cameras, camera_specs)
    _check_memory(jax_env, min(num_envs, episodes), image_size, len(cameras))
    rate = 1.0 / jax_env.dt
    fps = round(rate) if fps is None else fps
    if abs(fps - rate) > 1e-6:
        raise ParameterError(f"fps must be {name}'s control rate 1 / control_dt = {rate:g} Hz (a frame is a control "
                             f"step), got {fps}", "fps")
    with exclusive(out, "recording"):  # one writer per dataset, from its provenance read to the last rename
        if repair:
            from so101_mjx.data import dataset_repair

            dataset_repair.report_repair(Path(out), PROVENANCE, "record repair")
        provenance = Path(out) / PROVENANCE
        runs = read_provenance(provenance) if resume and provenance.is_file() else []
        offset = sum(r["tried"] for r in runs if r["seed"] == seed)
        max_tries = max_tries or 10 * episodes
        worlds, base, fns = min(num_envs, episodes), jax.random.PRNGKey(seed), _episode_fns(jax_env, fn)
        counts = {"tried": 0, "kept": 0, "successes": 0, "frames": 0}
        # a GL failure: before anything is written
        renderer = _Frames(jax_env, image_size, cameras, image_quality, visual, camera_specs) if image_size else None
        writer = dataset.DatasetWriter(out, features(jax_env, image_size, cameras, fps, dataset), fps,
                                       ROBOT_TYPE, resume)
        run_record = {"env": name, "env_config": dataclasses.asdict(jax_env.config), "backend": jax_env.backend,
                      "policy": source, "seed": seed, "only_success": only_success,
                      "visual_randomization": visual and dataclasses.asdict(visual),
                      "first_episode": writer.total_episodes}

        def provenance_file() -> dict[str, str]:
            this = run_record | {"tried": counts["tried"], "kept": writer.added}
            return {PROVENANCE: json.dumps({"runs": [*runs, this]}, indent=1, default=str)}

        start = time.perf_counter()
        progress.phase(f"record: compiling {worlds} worlds of {name} on {jax_env.backend}"
                       + (f", {len(cameras)} camera(s) at {image_size} px" if image_size else ""))
        shown = progress.bar(episodes, "record", "episode")
        try:
            with sigterm_interrupts():  # SIGTERM as Ctrl-C: the pending episodes are committed
                while counts["kept"] < episodes and counts["tried"] < max_tries:
                    _record_batch(jax_env, fns, renderer, writer, name, only_success, episodes, max_tries, counts,
                                  start, jnp.asarray(offset + counts["tried"] + np.arange(worlds), jnp.uint32), base,
                                  shown)
                    writer.commit(provenance_file())
        finally:  # an interrupted recording keeps every complete episode: the pending ones are committed
            shown.close()
            try:
                writer.close(provenance_file())
            finally:
                if renderer:
                    renderer.close()
        seconds = time.perf_counter() - start
        return {"env": name, "backend": jax_env.backend, "policy": source, **counts, "seconds": seconds,
                "total_episodes": writer.total_episodes, "out": str(out)}


def _record_batch(env: SO101Env, fns, renderer: _Frames | None, writer, name: str, only_success: bool, episodes: int,
                  max_tries: int, counts: dict[str, int], start: float, ids: jax.Array, base: jax.Array,
                  shown: Any) -> None:
    """One batch of worlds (attempts ``ids``) run, their kept episodes added to ``writer`` (not committed) and
    counted on ``shown`` (:func:`so101_mjx._progress.bar`)."""
    traj = run_worlds(env, fns, jax.vmap(jax.random.fold_in, (None, 0))(base, ids))
    visual_base = jax.random.fold_in(base, VISUAL_STREAM)
    for w in range(len(ids)):
        stop_point()
        if counts["kept"] == episodes or counts["tried"] == max_tries:
            return
        success = bool(traj["success"][w, traj["length"][w] - 1])
        keep = success or not only_success
        if keep:  # an attempt counts as tried once kept (or dropped): an interrupt retries it
            images = renderer.episode(traj, w, jax.random.fold_in(visual_base, int(ids[w]))) if renderer else None
            writer.add_episode(_episode(traj, w, env.agent_pos_size), task(name).instruction, images)
            counts["kept"] += 1
            counts["frames"] += int(traj["length"][w])
        counts["tried"] += 1
        counts["successes"] += success
        if keep:
            tried, frames, rate = counts["tried"], counts["frames"], counts["frames"] / (time.perf_counter() - start)
            progress.advance(shown, counts["kept"], episodes, f"{tried} tried, {frames:,} frames, {rate:,.1f} frames/s",
                             f"record: {counts['kept']}/{episodes} episodes ({tried} tried), {frames:,} frames, "
                             f"{rate:,.1f} frames/s")
