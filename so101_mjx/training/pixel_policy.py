"""A distilled pixel student: its network, its files (``student.npz``, ``distill.json``) and its ONNX export.

``so101-mjx export DISTILL_DIR`` (a directory with ``distill.json`` and ``student.npz``, written
by ``so101-mjx distill``) writes ``student.onnx`` beside them: opset 17, built node by node with
``onnx.helper`` (no torch): :class:`PixelStudent`'s forward pass, its convolutions in ONNX's NCHW
layout inside the graph. What a student observes and does is its :class:`Spec`, read from the env
config it was distilled in:

- one input per image camera, (batch, H, W, 3) uint8: ``pixels`` for the front camera,
  ``pixels_<camera>`` for another (:func:`input_name`);
- ``agent_pos`` (batch, P) float32: the env's ``agent_pos``, 14 entries in Cartesian mode, in joint
  mode the six motor positions in the follower's units (what a real follower measures);
- output ``actions`` (batch, A) float32: Cartesian ``[dx, dy, dz]`` in [-1, 1] and grasp in [0, 1], or
  joint-mode targets within the env's action bounds (``action_bounds`` in the metadata).

Metadata ``so101_mjx``: ``kind`` "pixel", the env id and env config (``image_size``, ``image_quality``,
``image_cameras``, control mode), the action bounds, the teacher and the library version.

:func:`so101_mjx.training.policies.load` reads such a file back (its metadata, weights and graph checked
against :func:`student_graph`; ``distill.json`` and ``student.npz``: :func:`read_run`) and runs it in
onnxruntime, or with flax (:func:`student`) when onnxruntime is missing.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
from jax import Array

from so101_mjx import _schema as schema
from so101_mjx._files import atomic_path, check_out
from so101_mjx.envs.arm import AGENT_POS_SIZE, agent_pos_layout
from so101_mjx.envs.config import MAX_IMAGE_SIZE
from so101_mjx.errors import InputError, ParameterError
from so101_mjx.training import estimator, npz
from so101_mjx.training.estimator import Estimator
from so101_mjx.training.onnx_graph import graph_model

KIND = "pixel"
STUDENT_FILE, META_FILE, ONNX_FILE = "student.npz", "distill.json", "student.onnx"
CONV_KERNELS, CONV_STRIDES = (8, 4, 3), (4, 2, 1)  # PixelStudent's convolutions (also its ONNX graph's)
MAX_WIDTH_FACTOR = 4  # a student.npz array may be as large as a PixelStudent this many times as wide (a header check)
MAX_CAMERAS = 4  # image cameras a student may see (a header check)
CARTESIAN_ACTIONS = 4  # [dx, dy, dz, grasp]


def conv_sides(size: int) -> list[int]:
    """Side (px) of each convolution's output for ``size`` x ``size`` frames ("VALID": < 1 is no output)."""
    sides = []
    for kernel, stride in zip(CONV_KERNELS, CONV_STRIDES):
        size = (size - kernel) // stride + 1
        sides.append(size)
    return sides


# px: 36, the least frame every convolution takes
MIN_IMAGE_SIZE = next(s for s in itertools.count(1) if conv_sides(s)[-1] >= 1)


def input_name(camera: str) -> str:
    """The ONNX input holding ``camera``'s frames: ``pixels`` for the front camera, ``pixels_<camera>`` for another."""
    return "pixels" if camera == "front" else f"pixels_{camera}"


Bounds = tuple[tuple[float, ...], tuple[float, ...]]


def action_size(bounds: Bounds | None) -> int:
    """A student's action size: 4 in Cartesian mode (no bounds), else the joint-mode bounds'."""
    return CARTESIAN_ACTIONS if bounds is None else len(bounds[0])


def as_frames(pixels: Any) -> tuple[Any, ...]:
    """A student's frames as a tuple, one array per camera (a bare array: the one camera's)."""
    return tuple(pixels) if isinstance(pixels, (tuple, list)) else (pixels,)


@dataclasses.dataclass(frozen=True)
class Spec:
    """What a student observes and does: ``size`` x ``size`` frames of each of ``cameras``, ``agent_pos``
    entries, and its actions' ``bounds`` (low, high) in joint mode (None: the Cartesian head); an ``estimator``
    student acts through its teacher (:mod:`so101_mjx.training.estimator`), None: through its own head."""

    size: int
    cameras: tuple[str, ...] = ("front",)
    agent_pos: int = AGENT_POS_SIZE
    bounds: Bounds | None = None
    estimator: Estimator | None = None

    @classmethod
    def of(cls, meta: dict[str, Any]) -> Spec:
        """The spec of a student's metadata (``env_config`` and, in joint mode, ``action_bounds``), checked."""
        config = meta["env_config"]
        joint = config.get("control_mode", "cartesian") == "joint"
        bounds = meta.get("action_bounds") if joint else None
        if joint and not (isinstance(bounds, list) and len(bounds) == 2
                          and all(isinstance(b, list) and len(b) == len(bounds[0]) > 0 for b in bounds)):
            raise InputError("action_bounds must be [low, high] (two equal-length lists) for a joint-mode student, "
                             f"got {bounds!r}")
        agent_pos = sum(n for _, n in agent_pos_layout(config.get("control_mode", "cartesian")))
        estimator = meta.get("estimator")
        if estimator is not None:
            estimator = Estimator.of(estimator, "metadata")
            if estimator.layers[0] != agent_pos + estimator.state_size or estimator.actions != action_size(bounds):
                raise InputError(f"estimator.layers {list(estimator.layers)} must take agent_pos ({agent_pos}) and the "
                                 f"{estimator.state_size} estimated entries and give {action_size(bounds)} actions")
        return cls(int(config["image_size"]), tuple(config.get("image_cameras") or ("front",)), agent_pos,
                   None if bounds is None else (tuple(map(float, bounds[0])), tuple(map(float, bounds[1]))), estimator)

    @property
    def actions(self) -> int:
        """The action's size (:func:`action_size`)."""
        return action_size(self.bounds)

    @property
    def head(self) -> int:
        """The student's head's outputs: the estimated entries of an estimator student, else the action's."""
        return self.estimator.state_size if self.estimator else self.actions

    def frames(self, obs: dict[str, Any]) -> tuple[Any, ...]:
        """The student's frames of an image env's observation (or a dataset of them), by camera: ``pixels/<camera>``."""
        return tuple(obs[f"pixels/{c}"] for c in self.cameras)

    @property
    def inputs(self) -> str:
        """The ONNX inputs, in words (metadata, errors)."""
        frames = "; ".join(f"{input_name(c)} (batch, {self.size}, {self.size}, 3) uint8 from the {c} camera"
                           for c in self.cameras)
        return f"{frames}; agent_pos (batch, {self.agent_pos}) float32"


def mid_half(bounds: Bounds) -> tuple[np.ndarray, np.ndarray]:
    """``(mid, half)`` (A,) float32 of joint-mode ``bounds``: an action is ``mid + half * tanh(raw)``."""
    low, high = (np.asarray(b, np.float32) for b in bounds)
    return (high + low) / 2, (high - low) / 2


def squash(x: Array, bounds: Bounds | None) -> Array:
    """The head's raw outputs (..., A) as actions: Cartesian ``tanh`` moves and a ``sigmoid`` grasp, or
    ``mid + half * tanh`` within joint-mode ``bounds``."""
    if bounds is None:
        return jnp.concatenate([jnp.tanh(x[..., :3]), jax.nn.sigmoid(x[..., 3:])], axis=-1)
    mid, half = mid_half(bounds)
    return mid + half * jnp.tanh(x)


class PixelStudent(nn.Module):
    """One conv tower per camera on its frames (..., H, W, 3) uint8; their features with ``agent_pos`` (..., P)
    through a hidden layer to the head: the action (..., A) squashed into ``bounds`` (:func:`squash`), or with an
    ``estimator`` the standardized privileged state (..., state_size) that the teacher (the ``teacher`` variable
    collection) turns into the action (:func:`so101_mjx.training.estimator.act`)."""

    channels: tuple[int, ...] = (32, 64, 64)
    hidden: int = 256
    bounds: Bounds | None = None
    estimator: Estimator | None = None

    @nn.compact
    def __call__(self, pixels: Array | Sequence[Array], agent_pos: Array,
                 output: str = "action") -> Array | tuple[Array, Array]:
        """The action (..., A); ``output="hidden"``: ``(action, hidden layer (..., hidden))``; ``"estimate"``:
        ``(action, head output)`` (an estimator student's standardized estimate)."""
        features = []
        for frames in as_frames(pixels):
            x = frames.astype(jnp.float32) / 255.0
            for channels, kernel, stride in zip(self.channels, CONV_KERNELS, CONV_STRIDES, strict=True):
                x = nn.relu(nn.Conv(channels, (kernel, kernel), (stride, stride), padding="VALID")(x))
            features.append(x.reshape(*x.shape[:-3], -1))
        est = self.estimator
        head = nn.Dense(est.state_size if est else action_size(self.bounds))  # built first: Dense_0 in every student
        hidden = nn.relu(nn.Dense(self.hidden)(jnp.concatenate([*features, agent_pos.astype(jnp.float32)], axis=-1)))
        raw = head(hidden)
        if est is None:
            action = squash(raw, self.bounds)
        else:
            action = estimator.act(estimator.variables(self, est), est, agent_pos, raw, jnp)
        return action if output == "action" else (action, hidden if output == "hidden" else raw)


def read_run(run_dir: str | Path) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """``(student params flattened by '/'-joined path, metadata)`` of a distill directory;
    ValueError naming the missing or unusable file (and field)."""
    run_dir = Path(run_dir)
    for name in (STUDENT_FILE, META_FILE):
        if not (run_dir / name).is_file():
            raise InputError(f"{run_dir} is not a distill directory: {name} is missing")
    run = schema.read_json(run_dir / META_FILE)
    env, env_config, spec = check_meta(run, run_dir / META_FILE)
    params = read_params(run_dir / STUDENT_FILE, spec)
    from so101_mjx import __version__
    from so101_mjx.envs.arm import JointMode
    from so101_mjx.envs.registry import task

    mode = JointMode.of(env_config)
    meta = {"kind": KIND, "env": env, "env_config": env_config, "teacher": run.get("teacher"), "version": __version__,
            "inputs": spec.inputs, "action_layout": task(env).action_layout if mode is None else mode.action_layout,
            **({} if spec.bounds is None else {"action_bounds": [list(b) for b in spec.bounds]}),
            **({} if spec.estimator is None else {"estimator": spec.estimator.as_json()})}
    return params, meta


def check_meta(meta: Any, source: str | Path) -> tuple[str, dict[str, Any], Spec]:
    """``(env, env_config, spec)`` of ``distill.json`` or a student ONNX's metadata, checked (ValueError naming
    ``source``)."""
    schema.fields(source, meta, {"env": schema.STRING, "env_config": schema.OBJECT})
    schema.fields(source, meta["env_config"], {"image_size": schema.integer(1)}, where="env_config.")
    cameras = meta["env_config"].get("image_cameras", ["front"])
    if not (isinstance(cameras, (list, tuple)) and 0 < len(cameras) <= MAX_CAMERAS
            and all(isinstance(c, str) for c in cameras)):
        raise InputError(f"{source}: env_config.image_cameras must be 1 to {MAX_CAMERAS} camera names, got {cameras!r}")
    try:
        spec = Spec.of(meta)
    except InputError as err:
        raise InputError(f"{source}: {err}") from None
    return meta["env"], dict(meta["env_config"]), spec


def read_params(path: str | Path, spec: Spec | None = None) -> dict[str, np.ndarray]:
    """The student params of a ``student.npz`` (flattened by '/'-joined path), checked by :func:`check_params`;
    first, in the headers, each array no larger than a student :data:`MAX_WIDTH_FACTOR` times as wide, on
    :data:`MAX_CAMERAS` cameras of ``spec.size`` px frames (default :data:`MAX_IMAGE_SIZE`), holds in float64."""
    size = spec.size if spec else MAX_IMAGE_SIZE
    channels, hidden = MAX_WIDTH_FACTOR * max(PixelStudent.channels), MAX_WIDTH_FACTOR * PixelStudent.hidden
    # bytes of a conv kernel (or the head), float64
    conv = 8 * max(CONV_KERNELS) ** 2 * channels * max(channels, hidden)
    # the hidden Dense kernel's
    dense = 8 * (MAX_CAMERAS * max(conv_sides(size)[-1], 1) ** 2 * channels + AGENT_POS_SIZE) * hidden

    def check(found: dict[str, npz.Header]) -> None:
        npz.limit(path, found, {n: dense if n == "params/Dense_1/kernel" else conv for n in found},
                  f"a student {MAX_WIDTH_FACTOR}x as wide as PixelStudent's on {MAX_CAMERAS} cameras of "
                  f"{size}px frames")

    params = npz.read(path, check, "student params")
    return check_params(params, path, spec)


def check_params(params: dict[str, np.ndarray], source: str | Path, spec: Spec | None = None) -> dict[str, np.ndarray]:
    """``params`` after checking they are a :class:`PixelStudent`'s: per camera, ``params/Conv_<i>/kernel``
    (k, k, in, out) and ``bias`` (out,) for the kernels of :data:`CONV_KERNELS`, then two Dense layers
    (:func:`_dense`), finite floats; with ``spec``, one tower per camera, the hidden layer as wide as their
    features and ``agent_pos``, and the head as wide as the action. ValueError naming ``source`` and the array
    otherwise."""
    all_params, (params, teacher) = params, estimator.split(params)
    if spec is not None and spec.estimator is not None:
        estimator.check(teacher, spec.estimator, str(source))
    elif teacher:
        raise InputError(f"{source}: teacher arrays {sorted(teacher)[:4]} in a student without an estimator")
    for name, value in params.items():
        schema.array(source, name, value)
    convs, dense = _count(params, "Conv"), _count(params, "Dense")
    towers = len(spec.cameras) if spec else convs // len(CONV_KERNELS)
    names = {f"params/{kind}_{i}/{part}" for kind, n in (("Conv", convs), ("Dense", dense)) for i in range(n)
             for part in ("kernel", "bias")}
    if set(params) != names or not 0 < towers <= MAX_CAMERAS or convs != towers * len(CONV_KERNELS):
        what = f"{len(spec.cameras)} camera(s)" if spec else f"1 to {MAX_CAMERAS} cameras"
        raise InputError(f"{source}: student params must be {len(CONV_KERNELS)} Conv layers for each of {what} "
                         f"and 2 Dense layers (kernel and bias each), got {sorted(params)[:12]}")
    layers = _layers(params, "Conv")
    widths = [k.shape[-1] for k, _ in layers[:len(CONV_KERNELS)]]
    for tower in range(towers):
        width, side = 3, None if spec is None else spec.size
        for (kernel, bias), size, stride, out in zip(layers[tower * len(CONV_KERNELS):], CONV_KERNELS,
                                                     CONV_STRIDES, widths):
            if kernel.shape != (size, size, width, out) or bias.shape != (out,):
                raise InputError(f"{source}: Conv kernel {kernel.shape} and bias {bias.shape}; expected ({size}, "
                                 f"{size}, {width}, {out}) and ({out},), as the first camera's")
            width, side = out, side and (side - size) // stride + 1
    _, hidden = _dense(params, source, None if spec is None else spec.head)
    if spec is not None and side is not None and (  # side: spec.size's, so not None with spec
            side < 1 or hidden[0].shape[0] != towers * side * side * width + spec.agent_pos):
        cams = f"{towers} x " if towers > 1 else ""
        raise InputError(f"{source}: image_size {spec.size} gives {cams}{max(side, 0)}x{max(side, 0)}x{width} "
                         f"conv features + {spec.agent_pos} agent_pos, but the hidden layer takes "
                         f"{hidden[0].shape[0]} inputs")
    return all_params


def student(params: dict[str, np.ndarray], spec: Spec) -> tuple[PixelStudent, Any]:
    """``(the PixelStudent, its flax params)`` of params flattened by '/'-joined path (checked by
    :func:`check_params`)."""
    from flax import traverse_util

    channels = tuple(int(kernel.shape[-1]) for kernel, _ in _layers(params, "Conv")[:len(CONV_KERNELS)])
    net = PixelStudent(channels=channels, hidden=int(_dense(params)[1][0].shape[1]), bounds=spec.bounds,
                       estimator=spec.estimator)
    return net, traverse_util.unflatten_dict({tuple(k.split("/")): jnp.asarray(v) for k, v in params.items()})


def _count(params: dict[str, np.ndarray], kind: str) -> int:
    return len({name.split("/")[1] for name in params if name.startswith(f"params/{kind}_")})


def _layers(params: dict[str, np.ndarray], kind: str) -> list[tuple[np.ndarray, np.ndarray]]:
    """``(kernel, bias)`` of ``Conv_i`` / ``Dense_i`` in order."""
    out, i = [], 0
    while f"params/{kind}_{i}/kernel" in params:
        out.append((params[f"params/{kind}_{i}/kernel"], params[f"params/{kind}_{i}/bias"]))
        i += 1
    return out


def _dense(params: dict[str, np.ndarray], source: str | Path = "student params",
           actions: int | None = None) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """``(head, hidden)`` ``(kernel, bias)``: in ``nn.Dense(A)(relu(nn.Dense(hidden)(x)))`` flax builds
    (and numbers) the head first, ``Dense_0``; ValueError unless the hidden layer feeds the head (of ``actions``
    outputs)."""
    dense = _layers(params, "Dense")
    if (len(dense) != 2 or any(len(k.shape) != 2 or b.shape != k.shape[1:] for k, b in dense)
            or dense[1][0].shape[1] != dense[0][0].shape[0]
            or (actions is not None and dense[0][0].shape[1] != actions)):
        raise InputError(f"{source}: student params must hold a hidden Dense layer feeding a head of "
                         f"{actions or 'A'} actions (kernels (in, out), biases (out,)), got shapes "
                         f"{[(k.shape, b.shape) for k, b in dense]}")
    return dense[0], dense[1]


def onnx_model(params: dict[str, np.ndarray], meta: dict[str, Any]):
    """The student as an ``onnx.ModelProto`` (checked)."""
    return graph_model(student_graph(params, Spec.of(meta)), meta)


def student_graph(params: dict[str, np.ndarray], spec: Spec):
    """The student's ``onnx.GraphProto`` for ``spec`` (params checked by :func:`check_params`): what
    :func:`onnx_model` writes and :func:`so101_mjx.training.policies.load` compares a file with."""
    from onnx import TensorProto, helper

    from so101_mjx.training.export import graph_builders

    inits: list = []
    nodes: list = []
    const, node = graph_builders(inits, nodes)
    convs, (head, hidden) = _layers(params, "Conv"), _dense(params)
    const("byte_scale", 255.0)
    features = []
    for tower, camera in enumerate(spec.cameras):
        name, suffix = input_name(camera), "" if camera == "front" else f"_{camera}"
        x = node("Cast", [name], f"{name}_float", to=TensorProto.FLOAT)
        x = node("Div", [x, "byte_scale"], f"{name}_unit")
        x = node("Transpose", [x], f"{name}_nchw", perm=[0, 3, 1, 2])
        for i in range(tower * len(CONV_KERNELS), (tower + 1) * len(CONV_KERNELS)):
            (kernel, bias), stride = convs[i], CONV_STRIDES[i % len(CONV_KERNELS)]
            weight = np.transpose(kernel, (3, 2, 0, 1))  # flax HWIO -> ONNX OIHW
            x = node("Conv", [x, const(f"conv_{i}_weight", weight), const(f"conv_{i}_bias", bias)], f"conv_{i}",
                     kernel_shape=list(kernel.shape[:2]), strides=[stride, stride], pads=[0, 0, 0, 0])
            x = node("Relu", [x], f"conv_{i}_relu")
        x = node("Transpose", [x], f"features{suffix}_nhwc", perm=[0, 2, 3, 1])  # flatten in flax's (H, W, C) order
        features.append(node("Flatten", [x], f"features{suffix}", axis=1))
    agent_pos = node("Cast", ["agent_pos"], "agent_pos_float", to=TensorProto.FLOAT)
    x = node("Concat", [*features, agent_pos], "joined", axis=1)
    x = node("Relu", [node("Add", [node("MatMul", [x, const("dense_0_kernel", hidden[0])], "matmul_0"),
                                   const("dense_0_bias", hidden[1])], "dense_0")], "hidden")
    x = node("Add", [node("MatMul", [x, const("dense_1_kernel", head[0])], "matmul_1"),
                     const("dense_1_bias", head[1])], "head")
    if spec.estimator is not None:
        estimator.graph_nodes(estimator.split(params)[1], spec.estimator, agent_pos, x,
                              graph_builders(inits, nodes, "teacher_"))
    elif spec.bounds is None:
        for name, value in {"move_start": 0, "move_end": 3, "grasp_start": 3, "grasp_end": 4, "axis": 1}.items():
            const(name, [value], np.int64)
        move = node("Tanh", [node("Slice", [x, "move_start", "move_end", "axis"], "move_raw")], "move")
        grasp = node("Sigmoid", [node("Slice", [x, "grasp_start", "grasp_end", "axis"], "grasp_raw")], "grasp")
        node("Concat", [move, grasp], "actions", axis=1)
    else:
        mid, half = mid_half(spec.bounds)
        x = node("Mul", [node("Tanh", [x], "squashed"), const("action_half", half)], "scaled")
        node("Add", [x, const("action_mid", mid)], "actions")
    frames = [helper.make_tensor_value_info(input_name(c), TensorProto.UINT8, ["batch", spec.size, spec.size, 3])
              for c in spec.cameras]
    return helper.make_graph(
        nodes, "so101_mjx_pixel_student",
        [*frames, helper.make_tensor_value_info("agent_pos", TensorProto.FLOAT, ["batch", spec.agent_pos])],
        [helper.make_tensor_value_info("actions", TensorProto.FLOAT, ["batch", spec.actions])],
        inits,
    )


def export(run_dir: str | Path, out: str | Path | None = None) -> Path:
    """Write the student of distill directory ``run_dir`` to ``out`` (default ``run_dir/student.onnx``)."""
    import onnx

    params, meta = read_run(run_dir)
    out = Path(out) if out is not None else Path(run_dir) / ONNX_FILE
    if out.suffix != ".onnx":
        raise ParameterError(f"out must end in .onnx, got {out}", "out")
    check_out(out)
    with atomic_path(out) as tmp:
        onnx.save(onnx_model(params, meta), tmp)
    print(f"exported the pixel student of {meta['env']} ({run_dir}) -> {out}")
    return out
