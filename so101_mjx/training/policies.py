"""One door for trained policies: :func:`load` (``so101_mjx.load_policy``) reads any policy file, checks it
and returns a :class:`Policy`: what it is, how to call it, and the env it acts in.

What it reads (:attr:`Policy.format`):

- ``checkpoint``: a run, ``checkpoints/`` or step directory (:func:`~so101_mjx.training.checkpoint.read_policy`,
  its ``run.json`` the metadata). JAX form: Brax's own deterministic inference function; numpy form: the
  numpy runner on its weights.
- ``onnx`` / ``npz``: an export (:mod:`so101_mjx.training.export`), a complete, finite network matching its
  metadata, an ONNX's graph compared with the one export writes from its weights (a file this exporter did
  not write, or one edited since, is refused). JAX form: the weights as a JAX MLP
  (:func:`~so101_mjx.training.policy.forward`), so an ONNX policy runs inside jit on any backend; numpy form:
  onnxruntime for a ``.onnx`` (the numpy runner when it is missing), the numpy runner for a ``.npz``. Without
  onnx a ``.onnx`` is read from the ``.npz`` beside it.
- a pixel student (:mod:`so101_mjx.training.pixel_policy`): ``student.onnx`` (a graph with ``pixels``
  inputs; its weights and graph checked) or a distill directory's ``student.npz``. Both forms take
  ``(frames, agent_pos (B, P))``, ``frames`` one (B, H, W, 3) uint8 array per camera of its
  :attr:`Policy.cameras` (a bare array for one camera); numpy: onnxruntime for the ``.onnx``, else the
  flax student, jitted.

- ``lerobot:PATH``: a lerobot policy directory (:mod:`so101_mjx.training.lerobot_policy`), in torch: it sees
  its cameras' frames and the motor positions in the task's joint mode, and runs in any task. JAX form: a host
  callback that takes every world of a vmapped rollout in one call.

A bad file is one :class:`~so101_mjx.errors.InputError` line naming it. ``so101-mjx eval``, ``replay``,
``record``, ``distill`` and ``deploy`` all load their policies here.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from so101_mjx import _schema as schema
from so101_mjx.envs import make, registry
from so101_mjx.envs.arm import agent_pos_layout
from so101_mjx.envs.base import SO101Env
from so101_mjx.envs.config import ArmConfig
from so101_mjx.errors import InputError, MissingFileError, ParameterError
from so101_mjx.training import lerobot_policy, onnx_graph
from so101_mjx.training.export import obs_layout, policy_graph
from so101_mjx.training.policy import NumpyPolicy, PolicyWeights, forward
from so101_mjx.training.pretrained import PRETRAINED, pretrained, pretrained_dir, shipped  # noqa: F401

# the jitted env's camera options: a state policy's env renders no frames; the gym envs take render_spec instead
IMAGE_OPTIONS = ("image_obs", "image_size", "image_quality", "image_cameras", "visual_randomization", "camera_specs")


def without_cameras(env_config: dict[str, Any]) -> dict[str, Any]:
    """``env_config`` without the camera options (:data:`IMAGE_OPTIONS`)."""
    return {k: v for k, v in env_config.items() if k not in IMAGE_OPTIONS}


def camera_files(env_config: dict[str, Any]) -> dict[str, Any]:
    """The camera specs a pixel policy was trained with (``camera_specs``: a mapping, or the pairs a
    saved config holds), by camera name; empty for the scene's own cameras. The host-side envs that run
    it render through them (the gym env's ``camera_spec``, the simulated follower's ``camera_specs``)."""
    return dict(env_config.get("camera_specs") or ())


@dataclasses.dataclass(frozen=True, eq=False)
class Policy:
    """A loaded, checked policy (:func:`load`). A state policy maps the flat observation ``(..., obs_size)``
    (agent_pos, then environment_state) to env actions ``(..., action_size)``; a pixel policy maps
    ``(frames, agent_pos (B, P))`` to ``(B, A)`` (:attr:`spec`)."""

    source: Path  # the checkpoint step directory, .onnx, .npz or lerobot policy directory read
    format: str  # "checkpoint", "onnx", "npz" or "lerobot"
    env: str  # the registered env id it was trained in
    # the run or export metadata (env, env_config, obs_size, action_map, ...)
    metadata: dict[str, Any] = dataclasses.field(repr=False)
    pixel: bool = False  # a distilled pixel student (observes its cameras' frames and agent_pos)
    # a state policy's checked weights (its numpy runner)
    weights: NumpyPolicy | None = dataclasses.field(default=None, repr=False)
    # a checkpoint's Brax params; a pixel student's params, flattened by '/'-joined path
    params: Any = dataclasses.field(default=None, repr=False)
    # a lerobot policy's torch runner (:class:`~so101_mjx.training.lerobot_policy.Runner`)
    runner: Any = dataclasses.field(default=None, repr=False)

    @property
    def env_config(self) -> dict[str, Any]:
        """The env config it was trained (a pixel student: distilled) in, as its metadata holds it."""
        return self.metadata["env_config"]

    @property
    def control_mode(self) -> str:
        """``"cartesian"`` ([dx, dy, dz, grasp]) or ``"joint"`` (motor targets)."""
        return self.env_config.get("control_mode", "cartesian")

    @functools.cached_property
    def config(self) -> ArmConfig:
        """Its env's config, validated (the camera options aside)."""
        return registry.split_options(registry.task(self.env), "c", without_cameras(self.env_config))[0]

    @property
    def control_rate(self) -> float:
        """Actions per second (Hz): 1 / the env's ``control_dt``."""
        return 1.0 / self.config.periods()[0]

    @property
    def obs_layout(self) -> str | None:
        """What it observes: a state policy's flat observation layout (its metadata's, else this version's), a
        pixel student's inputs."""
        if self.pixel:
            return self.metadata.get("inputs")
        return self.metadata.get("obs_layout") or obs_layout(self.env, self.metadata["obs_size"], self.env_config)

    @property
    def image_size(self) -> int | None:
        """A pixel student's frame side (px); None for a state policy."""
        return int(self.env_config["image_size"]) if self.pixel else None

    @functools.cached_property
    def spec(self):
        """A pixel student's :class:`~so101_mjx.training.pixel_policy.Spec` (cameras, agent_pos, action bounds); None
        for a state policy."""
        from so101_mjx.training import pixel_policy

        return pixel_policy.Spec.of(self.metadata) if self.pixel else None

    @property
    def cameras(self) -> tuple[str, ...]:
        """The cameras a pixel student sees, in its inputs' order; none for a state policy."""
        return self.spec.cameras if self.pixel else ()

    @functools.cached_property
    def jax_fn(self) -> Callable[..., Any]:
        """The policy in JAX: jit-traceable (a checkpoint's is Brax's jitted inference function, a pixel student's
        its flax network, jitted). Its arrays are made eagerly, even where it is first read inside a trace."""
        import jax

        with jax.ensure_compile_time_eval():  # else arrays made inside a trace would be that trace's, and leak
            return self._jax_fn()

    def _jax_fn(self) -> Callable[..., Any]:
        import jax
        import jax.numpy as jnp

        if self.runner is not None:
            return self.runner.jax_fn()
        if self.pixel:
            from so101_mjx.training import pixel_policy

            student, tree = pixel_policy.student(self.params, self.spec)
            return functools.partial(jax.jit(student.apply), tree)
        if self.format == "checkpoint":
            from so101_mjx.training import checkpoint

            return checkpoint.inference_fn(self.metadata, self.params)
        assert self.weights is not None  # a state policy's (load sets them)
        weights, scale, offset = self.weights.weights, jnp.asarray(self.weights.scale), jnp.asarray(self.weights.offset)
        return lambda obs: forward(weights, obs, scale, offset, jnp)

    @functools.cached_property
    def numpy_fn(self) -> Callable[..., np.ndarray]:
        """The policy on numpy arrays (batched): a ``.onnx`` in onnxruntime when it is installed, else the numpy
        runner (a pixel student: :attr:`jax_fn`)."""
        if self.runner is not None:
            from so101_mjx.training.pixel_policy import as_frames

            return lambda frames, agent_pos: self.runner(np.asarray(agent_pos, np.float32), *as_frames(frames))
        session = _session(self.source, "flax" if self.pixel else "the numpy runner") if self.format == "onnx" else None
        if self.pixel:
            from so101_mjx.training.pixel_policy import as_frames, input_name

            names = [input_name(c) for c in self.cameras]
            if session is not None:
                return lambda frames, agent_pos: session.run(["actions"], {
                    **{n: np.asarray(f, np.uint8) for n, f in zip(names, as_frames(frames), strict=True)},
                    "agent_pos": np.asarray(agent_pos, np.float32)})[0]
            import jax.numpy as jnp

            return lambda frames, agent_pos: np.asarray(self.jax_fn(
                tuple(jnp.asarray(f, jnp.uint8) for f in as_frames(frames)), jnp.asarray(agent_pos, jnp.float32)))
        if session is not None:
            return lambda obs: session.run(["actions"], {"obs": np.asarray(obs, np.float32)})[0]
        assert self.weights is not None  # a state policy's (load sets them)
        return self.weights

    def gym_fn(self, obs: dict[str, Any]) -> np.ndarray:
        """The action ``(action_size,)`` for one observation of its gym env (``agent_pos`` and
        ``environment_state``; a pixel student's ``pixels.<camera>`` and ``agent_pos``), by :attr:`numpy_fn`."""
        if self.pixel:
            return self.numpy_fn(tuple(obs["pixels"][c][None] for c in self.cameras), obs["agent_pos"][None])[0]
        return self.numpy_fn(np.concatenate([obs["agent_pos"], obs["environment_state"]])[None])[0]

    def env_fn(self, env: SO101Env) -> Callable[[Any], Any]:
        """The policy on one world's observation of ``env`` (its jitted env, :meth:`make_env` or ``env_for``'s),
        traceable: a state policy's flat observation, a pixel policy's ``pixels/<camera>`` and ``agent_pos``."""
        if not self.pixel:
            return self.jax_fn
        act = self.runner.jax_fn(env.instruction) if self.runner is not None else self.jax_fn
        return lambda obs: act(self.spec.frames(obs), obs["agent_pos"])

    def reset(self) -> None:
        """Before a rollout: a lerobot policy's action queue emptied (the others keep no state)."""
        if self.runner is not None:
            self.runner.reset()

    def require_state(self, use: str) -> Policy:
        """This policy; InputError when it is a pixel student, which ``use`` cannot run (it feeds the flat
        observation)."""
        if self.pixel:
            raise InputError(f"{self.source} is a pixel policy; {use} takes a state policy "
                             "(a checkpoint or an exported policy.onnx / .npz)")
        return self

    def env_for(self, env: str | None = None, force: bool = False) -> tuple[str, dict[str, Any]]:
        """``(env id, env config)`` to run it in: its own env and config, or ``env`` with its default config.
        InputError for a pixel student in another env; for a state policy when ``env``'s observation size
        differs from its, or, unless ``force``, when ``env`` is another env or the metadata's ``obs_layout`` is
        not this version's layout for it (same sizes, other meaning)."""
        name = registry.canonical(env) if env else self.env
        if self.runner is not None:  # the follower's features, in every task, from random placements
            from so101_mjx.envs.rollout import placement_config

            return name, {**self.env_config, **placement_config(name, True)}
        if self.pixel:
            if name != self.env:
                raise ParameterError(f"{self.source} is a pixel policy of {self.env}; it runs only there, "
                                     f"not in env {env}", "env")
            return name, self.env_config
        config = self.env_config if name == self.env else {}
        size, wanted = _obs_size(name, config), self.metadata["obs_size"]
        if size != wanted:
            raise InputError(f"policy expects observations of size {wanted} ({self.env}); {name} gives {size}")
        expected = obs_layout(name, size, config)
        if not force and name != self.env:
            raise ParameterError(f"{self.source} is a {self.env} policy; env {name} differs (its observations mean "
                                 f"other things; pass force=True to run it in {name} anyway, with {name}'s default "
                                 "config)",
                                 "env", "force=True")
        if not force and self.metadata.get("obs_layout", expected) != expected:
            raise ParameterError(f"{self.source}: observation layout {self.metadata['obs_layout']!r} is not {name}'s "
                                 f"{expected!r} (pass force=True to run it anyway)", "force=True")
        return name, config

    def make_env(self, backend: str | None = None, **config: Any) -> SO101Env:
        """Its jitted env (:func:`so101_mjx.envs.make`) on ``backend``, in its env config with ``config``'s fields
        overriding."""
        return make(self.env, backend=backend, **{**self.env_config, **config})


LEROBOT_ENV = "SO101PickCube-v0"  # a lerobot policy's task unless one is named
def label(path: str | Path) -> str:
    """A policy's name in messages: ``pretrained:<name>`` as given, else its file's or directory's name."""
    return str(path) if str(path).startswith(PRETRAINED) else Path(path).name


def load(path: str | Path) -> Policy:
    """The checked policy at ``path``: a checkpoint (run, ``checkpoints/`` or step directory), an exported
    ``.onnx`` / ``.npz``, a pixel student (``student.onnx``, a distill directory's ``student.npz``),
    ``pretrained:<task>[/<variant>]`` (:func:`pretrained`) or ``lerobot:<directory>`` (a lerobot policy,
    :func:`_lerobot`). InputError naming the file when it is none of these (MissingFileError when it does not exist)."""
    if str(path).startswith(PRETRAINED):
        path = pretrained(str(path)[len(PRETRAINED):])
    if str(path).startswith(lerobot_policy.PREFIX):
        return _lerobot(Path(str(path)[len(lerobot_policy.PREFIX):]))
    path = Path(path)
    if path.suffix not in (".onnx", ".npz"):
        if path.is_file():
            raise InputError(f"policy must be a checkpoint directory or an exported .onnx / .npz file, got {path}")
        from so101_mjx.training import checkpoint

        step_dir = checkpoint.resolve(path)
        weights, params = checkpoint.read_policy(step_dir)
        meta = weights.metadata
        return Policy(step_dir, "checkpoint", _env(meta, step_dir), meta, False, weights, params)
    if not path.is_file():
        raise MissingFileError(f"policy not found: {path}")
    if path.suffix == ".npz":
        from so101_mjx.training import pixel_policy

        if path.name == pixel_policy.STUDENT_FILE and (path.parent / pixel_policy.META_FILE).is_file():
            params, meta = pixel_policy.read_run(path.parent)
            return Policy(path, "npz", _env(meta, path), meta, True, params=params)
        return _state(path, "npz", NumpyPolicy.load(path))
    try:
        import onnx  # noqa: F401
    except ImportError:
        npz = path.with_suffix(".npz")
        if not npz.is_file():
            raise InputError(f"reading {path} needs onnx (pip install so101-mjx[export]) and {npz} "
                             "is missing") from None
        print(f"onnx is not installed: using {npz}")
        return _state(npz, "npz", NumpyPolicy.load(npz))
    model = onnx_graph.load(path)
    if any(i.name == "pixels" or i.name.startswith("pixels_") for i in model.graph.input):
        return _pixel_onnx(path, model)
    return _state(path, "onnx", _state_onnx(path, model))


load_policy = load  # the public name: so101_mjx.load_policy


def _env(meta: dict[str, Any], source: Path) -> str:
    """The registered env id of ``meta["env"]``; InputError naming ``source`` for an unknown one."""
    try:
        return registry.canonical(meta["env"])
    except ValueError as err:
        raise InputError(f"{source}: metadata env: {err}") from None


def _lerobot(path: Path) -> Policy:
    """The lerobot policy directory ``path`` (:mod:`~so101_mjx.training.lerobot_policy`), in PickCube until
    ``env_for`` names another task."""
    from so101_mjx.robot import motors, scenes

    cameras, side = lerobot_policy.read_features(path)
    limits = motors.motor_limits(motors.joint_ranges(scenes.load_model()), "degrees")
    meta = {"env": LEROBOT_ENV, "env_config": lerobot_policy.env_config(cameras, side),
            "action_bounds": [limits[:, 0].tolist(), limits[:, 1].tolist()],
            "inputs": "; ".join([*(f"observation.images.{c} (3, {side}, {side})" for c in cameras),
                                 "observation.state (6) motor positions, degrees"])}
    return Policy(path, "lerobot", LEROBOT_ENV, meta, True, runner=lerobot_policy.Runner(path, cameras))


def _state(source: Path, fmt: str, weights: NumpyPolicy) -> Policy:
    return Policy(source, fmt, _env(weights.metadata, source), weights.metadata, False, weights)


def _obs_size(name: str, env_config: dict[str, Any]) -> int:
    """Flat observation size of env ``name`` under ``env_config`` (agent_pos, by control mode, + environment_state)."""
    layout = agent_pos_layout(env_config.get("control_mode", "cartesian"))
    return sum(size for _, size in layout) + registry.task(name).task_obs_size()


def _session(path: Path, runner: str):
    """An onnxruntime session (CPU) of ``path``; None, saying that ``runner`` runs its weights, without onnxruntime."""
    try:
        import onnxruntime as ort
    except ImportError:
        print(f"onnxruntime is not installed: running the ONNX weights with {runner}")
        return None
    try:
        return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    except Exception as err:  # onnxruntime raises its own exception types for invalid models
        raise InputError(f"{path} is not an exported so101_mjx ONNX policy: {err}") from None


def _state_onnx(path: Path, model) -> NumpyPolicy:
    """The state policy an ONNX export ``model`` holds (its initializers and metadata), checked as
    :meth:`NumpyPolicy.checked`, its graph compared with the one :func:`~so101_mjx.training.export.policy_graph`
    builds from those weights (:func:`~so101_mjx.training.onnx_graph.check_structure`)."""
    meta = onnx_graph.read_metadata(model, path)
    inits = onnx_graph.initializers(model, path)
    n = sum(name.startswith("kernel_") for name in inits)
    hidden = {node.name: node.op_type for node in model.graph.node}.get("hidden_0")
    names = ["obs_mean", "obs_std", "action_scale", "action_offset",
             *(f"{k}_{i}" for i in range(n) for k in ("kernel", "bias"))]
    missing = [name for name in names if name not in inits]
    network = meta.get("network")
    network = network if isinstance(network, dict) else {}
    activation = ({"Mul": "swish", "Relu": "relu", "Tanh": "tanh"}.get(hidden, hidden) if hidden
                  else network.get("activation"))
    if missing or not isinstance(activation, str):
        raise InputError(f"{path} is not an exported so101_mjx ONNX policy: initializers {missing} missing, "
                         f"hidden activation {activation!r}")
    weights = PolicyWeights(
        mean=inits["obs_mean"], std=inits["obs_std"], kernels=tuple(inits[f"kernel_{i}"] for i in range(n)),
        biases=tuple(inits[f"bias_{i}"] for i in range(n)), activation=activation,
    )
    scale, offset = (schema.array(path, name, inits[name], dtype="float32", ndim=1)
                     for name in ("action_scale", "action_offset"))
    if isinstance(meta.get("action_map"), dict):  # the graph's own
        meta = {**meta, "action_map": {**meta["action_map"], "scale": scale.tolist(), "offset": offset.tolist()}}
    policy = NumpyPolicy.checked(weights, meta, path)
    onnx_graph.check_structure(model, policy_graph(weights, scale, offset), path)
    return policy


def _pixel_onnx(path: Path, model) -> Policy:
    """The pixel student a ``student.onnx`` ``model`` holds, after checking its metadata (``kind`` "pixel", ``env``,
    ``env_config.image_size``), its weights (:func:`~so101_mjx.training.pixel_policy.check_params`, from the
    initializers) and its graph against the one :func:`~so101_mjx.training.pixel_policy.student_graph` builds
    from them."""
    from so101_mjx.training import estimator, pixel_policy as pp

    meta = onnx_graph.read_metadata(model, path)
    schema.fields(path, meta, {"kind": schema.one_of([pp.KIND])}, label="metadata field")
    _, _, spec = pp.check_meta(meta, path)
    inits = onnx_graph.initializers(model, path)
    convs = len(spec.cameras) * len(pp.CONV_KERNELS)
    names = {f"params/Dense_{1 - i}/{part}": f"dense_{i}_{part}" for i in range(2) for part in ("kernel", "bias")}
    names |= {f"params/Conv_{i}/{part}": f"conv_{i}_{'weight' if part == 'kernel' else 'bias'}"
              for i in range(convs) for part in ("kernel", "bias")}
    if spec.estimator is not None:  # the teacher's arrays, "teacher_<name>" (pixel_policy.student_graph)
        names |= {f"{estimator.COLLECTION}/{name}": f"teacher_{name}" for name in spec.estimator.shapes()}
    missing = sorted(v for v in names.values() if v not in inits)
    if missing:
        raise InputError(f"{path} is not an exported so101_mjx pixel student: initializers {missing} missing")
    params = {k: inits[v] for k, v in names.items()}
    for i in range(convs):  # ONNX OIHW -> flax HWIO
        weight = schema.array(path, f"conv_{i}_weight", params[f"params/Conv_{i}/kernel"], ndim=4)
        params[f"params/Conv_{i}/kernel"] = np.transpose(weight, (2, 3, 1, 0))
    pp.check_params(params, path, spec)
    onnx_graph.check_structure(model, pp.student_graph(params, spec), path)
    return Policy(path, "onnx", _env(meta, path), meta, True, params=params)
