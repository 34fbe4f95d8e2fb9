"""A task's worlds as one gymnasium ``VectorEnv``, stepped together in one jitted, vmapped call.

``gymnasium.vector.SyncVectorEnv`` over the gym env (:mod:`so101_mjx.gym.task_env`) steps B copies one after
another; :class:`SO101VectorEnv` steps B worlds of the same functional env (backend ``c``, the gym env's
jitted functions, :mod:`so101_mjx.gym.compiled`) at once and returns numpy arrays (B, ...) in the gym env's
state-observation layout (``agent_pos``, ``environment_state``; float32). Its episodes are the gym env's:

- a world reset with seed ``s`` starts where the gym env's ``reset(seed=s)`` does: its initial quantities
  drawn from the same numpy generator, a JAX key drawn after them, the IK target at the controlled point
  (the gym env's ``reset_robot``). A reset without seeds continues each world's generator;
- the actions are the gym env's (Cartesian ``[dx, dy, dz, grasp]`` with the reference's IK-target update,
  or joint-mode motor targets), one row per world;
- ``terminated``: the task's success or failure; ``truncated``: ``episode_length`` steps (the gym env's
  ``max_episode_steps``);
- autoreset: gymnasium's ``NEXT_STEP``. A world whose episode ended resets on its next ``step``, which
  ignores that world's action and returns its first observation with reward 0 and both flags false;
- ``info["is_success"]`` (B,) bool: each world's success after the step (what ``lerobot-eval`` reads).

``call(name)`` gives one value per world, as ``SyncVectorEnv.call`` does: ``_max_episode_steps``,
``task_description`` and ``task`` (the task's instruction) and ``render`` (the front camera's frames,
:attr:`render_size`, from the ``shadowed`` render model with the task's markers). ``call("render")`` renders a
world's frame when it is first read (:class:`Frames`): ``lerobot-eval`` keeps ``call("render")[:10]`` of a
batch of 64, and renders 10 frames a step, as it does over ``SyncVectorEnv``.

With ``image_obs=True`` the observation is the gym env's ``image_obs`` layout, ``{"pixels": {camera: (B, H, W, 3)
uint8, one per camera of image_cameras}, "agent_pos": (B, n)}`` at :attr:`render_size`: each camera's frames of
every world are drawn after each reset and step, in one call of the render workers
(:class:`~so101_mjx.render.batch.BatchRenderer`), from the model the gym env draws with at the same
``image_quality`` (``"full"``, the scene as shipped, by default; ``"shadowed"`` or ``"fast"`` are lighter), so the
frames equal the gym env's with the same options bit for bit; ``render`` then returns the first camera's.
``camera_specs`` (camera -> camera file, name or spec, as the gym env takes them) draws a camera through the user's
pose and lens, and shows each world's frame ``latency`` control ticks back (the world's first frame of an episode
stands for the older ones), as the gym env's ``pixels`` do.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator, Sequence
from typing import Any, overload

import jax
import jax.numpy as jnp
import numpy as np
from gymnasium import spaces
from gymnasium.utils import seeding
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from so101_mjx import _checks as checks
from so101_mjx.envs import registry
from so101_mjx.errors import InputError
from so101_mjx.gym.compiled import compiled, control_step, reset_draws
from so101_mjx.gym.mujoco_env import CAMERA
from so101_mjx.render.frames import check_quality

MAX_WORLDS = 65_536


class Frames(Sequence[np.ndarray]):
    """Each world's front frame (height, width, 3) uint8 at the state it was taken from, rendered on first read:
    an index or a slice renders the worlds it names that were not rendered yet, in one batch."""

    def __init__(self, render: Callable[[np.ndarray], np.ndarray], count: int):
        self._render, self._count = render, count  # render: world indices (k,) -> frames (k, H, W, 3)
        self._frames: dict[int, np.ndarray] = {}

    def __len__(self) -> int:
        return self._count

    def __iter__(self) -> Iterator[np.ndarray]:
        return iter(self[:])  # every world in one batch

    @overload
    def __getitem__(self, index: int) -> np.ndarray: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[np.ndarray, ...]: ...

    def __getitem__(self, index: int | slice) -> np.ndarray | tuple[np.ndarray, ...]:
        worlds = range(self._count)[index]  # IndexError / TypeError as a tuple's
        wanted = [worlds] if isinstance(worlds, int) else list(worlds)
        missing = [i for i in dict.fromkeys(wanted) if i not in self._frames]
        if missing:
            self._frames.update(zip(missing, self._render(np.asarray(missing))))
        return self._frames[worlds] if isinstance(worlds, int) else tuple(self._frames[i] for i in wanted)


class SO101VectorEnv(VectorEnv):
    """``num_envs`` worlds of task ``task`` (a registered name) with config fields ``options`` (as ``gym.make``
    takes them, e.g. ``control_mode="joint"``); see the module docstring."""

    def __init__(self, task: str, num_envs: int, render_size: tuple[int, int] = (480, 640), image_obs: bool = False,
                 image_cameras: Sequence[str] = (CAMERA,), image_quality: str | None = None,
                 camera_specs: Any = None, **options: Any):
        self.num_envs = checks.integer("num_envs", num_envs, ge=1, le=MAX_WORLDS)
        self.render_size = tuple(checks.integer(n, v, ge=1, le=8192) for n, v in zip(("height", "width"), render_size))
        self.image_obs = checks.flag("image_obs", image_obs)
        self._compiled = compiled(registry.task(task), None, options)
        env = self.env = self._compiled.env
        self.image_cameras = self._check_cameras(image_cameras)
        self.camera_specs = self._check_specs(camera_specs)
        self.image_quality = check_quality(image_quality or ("full" if self.image_obs else "shadowed"))
        self._dtype = jnp.result_type(float)
        low, high = env.arm.action_bounds()
        self.single_action_space = spaces.Box(low.astype(np.float32), high.astype(np.float32), dtype=np.float32)
        agent = spaces.Box(-np.inf, np.inf, (env.agent_pos_size,), np.float32)
        if self.image_obs:  # the gym env's image_obs layout
            frame = spaces.Box(0, 255, (*self.render_size, 3), np.uint8)
            pixels = spaces.Dict(dict.fromkeys(self.image_cameras, frame))
            self.single_observation_space = spaces.Dict({"pixels": pixels, "agent_pos": agent})
        else:
            self.single_observation_space = spaces.Dict({
                "agent_pos": agent,
                "environment_state": spaces.Box(-np.inf, np.inf, (env.task_obs_size(),), np.float32)})
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.metadata = {"render_fps": round(1.0 / env.config.periods()[0]), "autoreset_mode": AutoresetMode.NEXT_STEP}
        self.render_mode = "rgb_array"
        self._max_episode_steps = env.episode_length
        self._start = jax.jit(jax.vmap(self._start_one))
        self._advance = jax.jit(jax.vmap(self._advance_one))
        self._rngs = [seeding.np_random(None)[0] for _ in range(self.num_envs)]
        self._state: Any = None
        self._elapsed = np.zeros(self.num_envs, np.int64)
        self._ended = np.zeros(self.num_envs, bool)
        self._renderers: dict[str, Any] = {}  # camera -> BatchRenderer, made on first use
        self._pixels: dict[str, np.ndarray] = {}  # with image_obs: the last observation's frames, by camera
        self._histories: dict[str, list[Any]] = {}  # a lagged camera's frame History per world

    def _check_cameras(self, cameras: Any) -> tuple[str, ...]:
        """``image_cameras`` checked: distinct cameras of the task's scene, and only with ``image_obs``."""
        from so101_mjx.render.rig import check_cameras

        cameras = check_cameras(self.env.mj_model, cameras)
        if cameras != (CAMERA,):
            checks.needs_image_obs("image_cameras", self.image_obs)
        return cameras

    def _check_specs(self, camera_specs: Any) -> dict[str, Any]:
        """``camera_specs`` parsed (:func:`so101_mjx.render.camera.parse_specs`): camera -> CameraSpec, each of a
        camera of ``pixels`` and mounted on a body of the scene; only with ``image_obs``."""
        from so101_mjx.render import camera

        if camera_specs is not None:
            checks.needs_image_obs("camera_specs", self.image_obs)
        specs = dict(camera.parse_specs(camera_specs, self.image_cameras) or ())
        for name, spec in specs.items():
            spec.check_body(self.env.mj_model, f"camera_specs[{name!r}]")
        return specs

    # -- one world, jitted and vmapped ------------------------------------------------------------
    def _start_one(self, seed: jax.Array, fixed: dict[str, jax.Array]):
        """A world's first state: the gym env's reset from ``PRNGKey(seed)`` (``fixed``: the reference's draws, or
        none), then its ``reset_robot``."""
        c, key = self._compiled, jax.random.PRNGKey(seed)
        state = c.reset_to(key, **fixed) if fixed else c.reset(key)
        info = state.info.replace(ik_target=c.ik_point(state.physics), last_action_zero=jnp.zeros((), bool))
        return state.replace(info=info)

    def _advance_one(self, state, action: jax.Array, fresh, restart: jax.Array):
        """A world's next state: ``fresh`` where it ``restart``s, else one step with ``action``."""
        env = self.env
        if env.arm.joint_mode is not None:
            stepped = env.step(state, action)
        else:
            scale = jnp.asarray(env.config.action_scale, self._dtype)
            stepped = control_step(env, state, action, scale, jnp.asarray(env.config.cartesian_bounds, self._dtype))
        return jax.tree_util.tree_map(lambda a, b: jnp.where(restart, a, b), fresh, stepped)

    # -- host side --------------------------------------------------------------------------------
    def _draws(self, worlds: np.ndarray) -> tuple[np.ndarray, dict[str, jax.Array]]:
        """Key seeds (B,) and reset quantities for a restart of ``worlds`` (B,) bool, drawn from their generators as
        the gym env's ``reset`` draws them; the other worlds get placeholders (their generators untouched)."""
        env, seeds = self.env, np.zeros(self.num_envs, np.int32)
        per_world: list[dict[str, Any]] = [dict(env.fixed_reset) if env.reference_env else {}] * self.num_envs
        for i in np.flatnonzero(worlds):
            seeds[i], fixed = reset_draws(env, self._rngs[i])
            per_world[i] = fixed or {}
        return seeds, {k: jnp.asarray(np.stack([np.asarray(f[k], np.float64) for f in per_world]), self._dtype)
                       for k in per_world[0]}

    def _observation(self, started: np.ndarray) -> dict[str, Any]:
        """The observation of the current state; ``started`` (B,) bool: the worlds whose episode starts with it."""
        obs = np.asarray(self._state.obs, np.float32)
        size = self.env.agent_pos_size
        if self.image_obs:
            worlds = np.arange(self.num_envs)
            self._pixels = {camera: self._lagged(camera, self._draw(worlds, self._state, camera), started)
                            for camera in self.image_cameras}
            return {"pixels": dict(self._pixels), "agent_pos": obs[:, :size]}
        return {"agent_pos": obs[:, :size], "environment_state": obs[:, size:]}

    def _lagged(self, camera: str, frames: np.ndarray, started: np.ndarray) -> np.ndarray:
        """What ``camera`` shows (B, H, W, 3) when ``frames`` are drawn: each world's frame its latency back, from
        that world's :class:`~so101_mjx.render.latency.History` (restarted where the world ``started``), as the gym
        env's :class:`~so101_mjx.render.rig.CameraRig` keeps its scenes."""
        spec = self.camera_specs.get(camera)
        if spec is None or spec.latency == 0:
            return frames
        from so101_mjx.render.latency import History

        histories = self._histories.setdefault(camera, [History(spec.latency) for _ in range(self.num_envs)])
        for history, frame, start in zip(histories, frames, started):
            (history.start if start else history.push)(frame)
        return np.stack([history.ago(spec.latency) for history in histories])

    def reset(self, *, seed: int | Sequence[int | None] | None = None,
              options: dict[str, Any] | None = None) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """Every world's first observation. ``seed``: one int (world ``i`` takes ``seed + i``, as ``SyncVectorEnv``),
        one per world (None: fresh entropy), or None (each world's generator continues); ``options`` are ignored."""
        if seed is not None:
            seeds = [seed + i for i in range(self.num_envs)] if isinstance(seed, (int, np.integer)) else list(seed)
            if len(seeds) != self.num_envs:
                raise InputError(f"seed must be an int or {self.num_envs} seeds (one per world), got {len(seeds)}")
            self._rngs = [seeding.np_random(None if s is None else checks.integer("seed", s, ge=0))[0] for s in seeds]
        self._state = self._start(*self._draws(np.ones(self.num_envs, bool)))
        self._elapsed[:], self._ended[:] = 0, False
        return self._observation(np.ones(self.num_envs, bool)), {}

    def step(self, actions: Any) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """One control step of every world (``actions`` (num_envs, action size)); see the module docstring."""
        if self._state is None:
            raise InputError("step before reset: call reset() first")
        shape = (self.num_envs, self.env.arm.action_size)
        actions = checks.real_array("actions", actions, shape, layout=f" (one {self.env.arm.action_layout} per world)")
        restart = self._ended.copy()
        fresh = self._start(*self._draws(restart)) if restart.any() else self._state
        self._state = self._advance(self._state, jnp.asarray(actions, self._dtype), fresh, jnp.asarray(restart))
        success = np.asarray(self._state.info.succeed, bool) & ~restart
        terminated = (np.asarray(self._state.done) > 0) & ~restart
        self._elapsed = np.where(restart, 0, self._elapsed + 1)
        truncated = (self._elapsed >= self._max_episode_steps) & ~restart
        reward = np.where(restart, 0.0, np.asarray(self._state.reward, np.float64))
        self._ended = terminated | truncated
        return self._observation(restart), reward, terminated, truncated, {"is_success": success}

    def call(self, name: str, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        """One value per world of ``name``: ``_max_episode_steps``, ``task_description`` / ``task`` (the
        instruction), or ``render`` (that world's frame); AttributeError for another name."""
        if name == "render":
            return self._frames()  # type: ignore[return-value]  # a Sequence read as the tuple of frames
        values = {"_max_episode_steps": self._max_episode_steps, "task_description": self.env.instruction,
                  "task": self.env.instruction}
        if name not in values:
            raise AttributeError(f"SO101VectorEnv has no per-world attribute {name!r} (it has {sorted(values)}, "
                                 "render)")
        return (values[name],) * self.num_envs

    def get_attr(self, name: str) -> tuple[Any, ...]:
        """:meth:`call`'s values (``SyncVectorEnv.get_attr``)."""
        return self.call(name)

    def render(self) -> tuple[np.ndarray, ...]:
        """The front camera's frame (height, width, 3) uint8 of each world's current state."""
        return tuple(self._frames())

    def _frames(self) -> Sequence[np.ndarray]:
        """Each world's frame of the current state: with ``image_obs`` the observation's (its first camera's), else
        rendered when read."""
        if self._state is None:
            raise InputError("render before reset: call reset() first")
        if self.image_obs:
            return tuple(self._pixels[self.image_cameras[0]])
        state = self._state  # the frames are of the state of this call, whenever they are read
        return Frames(lambda worlds: self._draw(worlds, state), self.num_envs)

    def _draw(self, worlds: np.ndarray, state: Any, camera: str = CAMERA) -> np.ndarray:
        """``camera``'s frames (k, H, W, 3) uint8 of ``worlds`` (k,) of ``state``, in one call of the render workers,
        from the model of :attr:`image_quality` (:func:`so101_mjx.render.rig.frames_model`: with ``"full"`` a copy
        of the physics model, as the gym env draws it)."""
        if camera not in self._renderers:
            from so101_mjx.render.batch import BatchRenderer
            from so101_mjx.render.rig import frames_model

            height, width = self.render_size
            model = frames_model(copy.copy(self.env.mj_model), self.env.scene, self.image_quality, height, width)
            self._renderers[camera] = BatchRenderer(model, height, width, camera, markers=tuple(self.env.markers),
                                                    spec=self.camera_specs.get(camera))
        positions = self.env.marker_positions(state.info)
        marks = np.stack([np.asarray(positions[site]) for site in self.env.markers], axis=1) if positions else None
        qpos = np.asarray(state.physics.qpos)
        return self._renderers[camera].render(qpos[worlds], None if marks is None else marks[worlds])

    def close_extras(self, **kwargs: Any) -> None:
        for renderer in self._renderers.values():
            renderer.close()
        self._renderers = {}
