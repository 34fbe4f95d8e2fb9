"""A distilled pixel student: its network, its files (``student.npz``, ``distill.json``) and its ONNX export.

``so101-mjx export DISTILL_DIR`` (a directory with ``distill.json`` and ``student.npz``, written
by ``so101-mjx distill``) writes ``student.onnx`` beside them: opset 17, built node by node with
``onnx.helper`` (no torch), inputs ``pixels`` (batch, H, W, 3) uint8 and ``agent_pos`` (batch, 14)
float32, output ``actions`` (batch, 4) float32 in the env's action space (``[dx, dy, dz]`` in
[-1, 1], grasp in [0, 1]): :class:`PixelStudent`'s forward pass, its
convolutions in ONNX's NCHW layout inside the graph. Metadata ``so101_mjx``: ``kind`` "pixel",
the env id and env config (``image_size``, ``image_quality``), the teacher and the library version.

:func:`so101_mjx.training.policies.load` reads such a file back (its metadata, weights and graph checked
against :func:`student_graph`; ``distill.json`` and ``student.npz``: :func:`read_run`) and runs it in
onnxruntime, or with flax (:func:`student`) when onnxruntime is missing.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
from jax import Array

from so101_mjx import _schema as schema
from so101_mjx._files import atomic_path, check_out
from so101_mjx.envs.arm import AGENT_POS_SIZE
from so101_mjx.envs.config import MAX_IMAGE_SIZE
from so101_mjx.errors import InputError
from so101_mjx.training import npz
from so101_mjx.training.onnx_graph import graph_model

KIND = "pixel"
STUDENT_FILE, META_FILE, ONNX_FILE = "student.npz", "distill.json", "student.onnx"
CONV_KERNELS, CONV_STRIDES = (8, 4, 3), (4, 2, 1)  # PixelStudent's convolutions (also its ONNX graph's)
MAX_WIDTH_FACTOR = 4  # a student.npz array may be as large as a PixelStudent this many times as wide (a header check)


def conv_sides(size: int) -> list[int]:
    """Side (px) of each convolution's output for ``size`` x ``size`` frames ("VALID": < 1 is no output)."""
    sides = []
    for kernel, stride in zip(CONV_KERNELS, CONV_STRIDES):
        size = (size - kernel) // stride + 1
        sides.append(size)
    return sides


MIN_IMAGE_SIZE = next(s for s in itertools.count(1) if conv_sides(s)[-1] >= 1)  # px: 36, the least frame every convolution takes


class PixelStudent(nn.Module):
    """Conv net on ``pixels`` (..., H, W, 3) uint8 plus ``agent_pos`` (..., 14) -> env action (..., 4)."""

    channels: tuple[int, ...] = (32, 64, 64)
    hidden: int = 256

    @nn.compact
    def __call__(self, pixels: Array, agent_pos: Array) -> Array:
        x = pixels.astype(jnp.float32) / 255.0
        for channels, kernel, stride in zip(self.channels, CONV_KERNELS, CONV_STRIDES, strict=True):
            x = nn.relu(nn.Conv(channels, (kernel, kernel), (stride, stride), padding="VALID")(x))
        x = jnp.concatenate([x.reshape(*x.shape[:-3], -1), agent_pos.astype(jnp.float32)], axis=-1)
        x = nn.Dense(4)(nn.relu(nn.Dense(self.hidden)(x)))
        return jnp.concatenate([jnp.tanh(x[..., :3]), jax.nn.sigmoid(x[..., 3:])], axis=-1)




def read_run(run_dir: str | Path) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """``(student params flattened by '/'-joined path, metadata)`` of a distill directory;
    ValueError naming the missing or unusable file (and field)."""
    run_dir = Path(run_dir)
    for name in (STUDENT_FILE, META_FILE):
        if not (run_dir / name).is_file():
            raise InputError(f"{run_dir} is not a distill directory: {name} is missing")
    run = schema.read_json(run_dir / META_FILE)
    env, env_config = check_meta(run, run_dir / META_FILE)
    params = read_params(run_dir / STUDENT_FILE, env_config["image_size"])
    from so101_mjx import __version__
    from so101_mjx.envs.registry import task

    meta = {"kind": KIND, "env": env, "env_config": env_config, "teacher": run.get("teacher"), "version": __version__,
            "inputs": f"pixels (batch, {env_config['image_size']}, {env_config['image_size']}, 3) uint8 from the front camera; "
                      f"agent_pos (batch, {AGENT_POS_SIZE}) float32",
            "action_layout": task(env).action_layout}
    return params, meta


def check_meta(meta: Any, source: str | Path) -> tuple[str, dict[str, Any]]:
    """``(env, env_config)`` of ``distill.json`` or a student ONNX's metadata, checked (ValueError naming ``source``)."""
    schema.fields(source, meta, {"env": schema.STRING, "env_config": schema.OBJECT})
    schema.fields(source, meta["env_config"], {"image_size": schema.integer(1)}, where="env_config.")
    return meta["env"], dict(meta["env_config"])


def read_params(path: str | Path, image_size: int | None = None) -> dict[str, np.ndarray]:
    """The student params of a ``student.npz`` (flattened by '/'-joined path), checked by :func:`check_params`;
    first, in the headers, each array no larger than a student :data:`MAX_WIDTH_FACTOR` times as wide on
    ``image_size`` frames (default :data:`MAX_IMAGE_SIZE`) holds in float64."""
    size = image_size or MAX_IMAGE_SIZE
    channels, hidden = MAX_WIDTH_FACTOR * max(PixelStudent.channels), MAX_WIDTH_FACTOR * PixelStudent.hidden
    conv = 8 * max(CONV_KERNELS) ** 2 * channels * max(channels, hidden)  # bytes of a conv kernel (or the head), float64
    dense = 8 * (max(conv_sides(size)[-1], 1) ** 2 * channels + AGENT_POS_SIZE) * hidden  # the hidden Dense kernel's

    def check(found: dict[str, npz.Header]) -> None:
        npz.limit(path, found, {n: dense if n == "params/Dense_1/kernel" else conv for n in found},
                  f"a student {MAX_WIDTH_FACTOR}x as wide as PixelStudent's on {size}px frames")

    params = npz.read(path, check, "student params")
    return check_params(params, path, image_size)


def check_params(params: dict[str, np.ndarray], source: str | Path, image_size: int | None = None) -> dict[str, np.ndarray]:
    """``params`` after checking they are a :class:`PixelStudent`'s: ``params/Conv_<i>/kernel`` (k, k, in, out)
    and ``bias`` (out,) for the kernels of :data:`CONV_KERNELS`, then two Dense layers (:func:`_dense`),
    finite floats; with ``image_size``, the hidden layer as wide as the features of such frames.
    ValueError naming ``source`` and the array otherwise."""
    for name, value in params.items():
        schema.array(source, name, value)
    convs, dense = _count(params, "Conv"), _count(params, "Dense")
    names = {f"params/{kind}_{i}/{part}" for kind, n in (("Conv", convs), ("Dense", dense)) for i in range(n) for part in ("kernel", "bias")}
    if set(params) != names or convs != len(CONV_KERNELS):
        raise InputError(f"{source}: student params must be {len(CONV_KERNELS)} Conv and 2 Dense layers (kernel and bias each), "
                         f"got {sorted(params)[:12]}")
    width, side = 3, image_size
    for (kernel, bias), size, stride in zip(_layers(params, "Conv"), CONV_KERNELS, CONV_STRIDES):
        if kernel.shape != (size, size, width, kernel.shape[-1]) or bias.shape != kernel.shape[-1:]:
            raise InputError(f"{source}: Conv kernel {kernel.shape} and bias {bias.shape}; expected ({size}, {size}, {width}, C) and (C,)")
        width, side = kernel.shape[-1], side and (side - size) // stride + 1
    if any(len(k.shape) != 2 or b.shape != k.shape[1:] for k, b in _layers(params, "Dense")):
        raise InputError(f"{source}: Dense kernels must be (in, out) with biases (out,), got {[(k.shape, b.shape) for k, b in _layers(params, 'Dense')]}")
    hidden = _dense(params, source)[1][0]
    if image_size is not None and (side < 1 or hidden.shape[0] != side * side * width + AGENT_POS_SIZE):
        raise InputError(f"{source}: image_size {image_size} gives {max(side, 0)}x{max(side, 0)}x{width} conv features + "
                         f"{AGENT_POS_SIZE} agent_pos, but the hidden layer takes {hidden.shape[0]} inputs")
    return params


def student(params: dict[str, np.ndarray]) -> tuple[PixelStudent, Any]:
    """``(the PixelStudent, its flax params)`` of params flattened by '/'-joined path (checked by :func:`check_params`)."""
    from flax import traverse_util

    channels = tuple(int(kernel.shape[-1]) for kernel, _ in _layers(params, "Conv"))
    net = PixelStudent(channels=channels, hidden=int(_dense(params)[1][0].shape[1]))
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


def _dense(params: dict[str, np.ndarray], source: str | Path = "student params") -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """``(head, hidden)`` ``(kernel, bias)``: in ``nn.Dense(4)(relu(nn.Dense(hidden)(x)))`` flax builds
    (and numbers) the head first, ``Dense_0``; ValueError unless the hidden layer feeds the head."""
    layers = _layers(params, "Dense")
    if len(layers) != 2 or layers[1][0].shape[1] != layers[0][0].shape[0] or layers[0][0].shape[1] != 4:
        raise InputError(f"{source}: student params must hold a hidden Dense layer feeding a 4-action head, "
                         f"got shapes {[k.shape for k, _ in layers]}")
    return layers[0], layers[1]


def onnx_model(params: dict[str, np.ndarray], meta: dict[str, Any]):
    """The student as an ``onnx.ModelProto`` (checked)."""
    return graph_model(student_graph(params, int(meta["env_config"]["image_size"])), meta)


def student_graph(params: dict[str, np.ndarray], size: int):
    """The student's ``onnx.GraphProto`` for (size, size) frames (params checked by :func:`check_params`):
    what :func:`onnx_model` writes and :func:`so101_mjx.training.policies.load` compares a file with."""
    from onnx import TensorProto, helper, numpy_helper

    inits, nodes = [], []

    def const(name: str, value, dtype=np.float32) -> str:
        inits.append(numpy_helper.from_array(np.asarray(value, dtype), name))
        return name

    def node(op: str, inputs: list[str], name: str, **attrs) -> str:
        nodes.append(helper.make_node(op, inputs, [name], name=name, **attrs))
        return name

    convs, (head, hidden) = _layers(params, "Conv"), _dense(params)
    dense = (hidden, head)
    x = node("Cast", ["pixels"], "pixels_float", to=TensorProto.FLOAT)
    x = node("Div", [x, const("byte_scale", 255.0)], "pixels_unit")
    x = node("Transpose", [x], "pixels_nchw", perm=[0, 3, 1, 2])
    for i, ((kernel, bias), stride) in enumerate(zip(convs, CONV_STRIDES)):
        weight = np.transpose(kernel, (3, 2, 0, 1))  # flax HWIO -> ONNX OIHW
        x = node("Conv", [x, const(f"conv_{i}_weight", weight), const(f"conv_{i}_bias", bias)], f"conv_{i}",
                 kernel_shape=list(kernel.shape[:2]), strides=[stride, stride], pads=[0, 0, 0, 0])
        x = node("Relu", [x], f"conv_{i}_relu")
    x = node("Transpose", [x], "features_nhwc", perm=[0, 2, 3, 1])  # flatten in flax's (H, W, C) order
    x = node("Flatten", [x], "features", axis=1)
    x = node("Concat", [x, node("Cast", ["agent_pos"], "agent_pos_float", to=TensorProto.FLOAT)], "joined", axis=1)
    x = node("Relu", [node("Add", [node("MatMul", [x, const("dense_0_kernel", dense[0][0])], "matmul_0"),
                                   const("dense_0_bias", dense[0][1])], "dense_0")], "hidden")
    x = node("Add", [node("MatMul", [x, const("dense_1_kernel", dense[1][0])], "matmul_1"), const("dense_1_bias", dense[1][1])], "head")
    bounds = {"move_start": 0, "move_end": 3, "grasp_start": 3, "grasp_end": 4, "axis": 1}
    for name, value in bounds.items():
        const(name, [value], np.int64)
    move = node("Tanh", [node("Slice", [x, "move_start", "move_end", "axis"], "move_raw")], "move")
    grasp = node("Sigmoid", [node("Slice", [x, "grasp_start", "grasp_end", "axis"], "grasp_raw")], "grasp")
    nodes.append(helper.make_node("Concat", [move, grasp], ["actions"], name="actions", axis=1))
    return helper.make_graph(
        nodes, "so101_mjx_pixel_student",
        [helper.make_tensor_value_info("pixels", TensorProto.UINT8, ["batch", size, size, 3]),
         helper.make_tensor_value_info("agent_pos", TensorProto.FLOAT, ["batch", AGENT_POS_SIZE])],
        [helper.make_tensor_value_info("actions", TensorProto.FLOAT, ["batch", 4])],
        inits,
    )


def export(run_dir: str | Path, out: str | Path | None = None) -> Path:
    """Write the student of distill directory ``run_dir`` to ``out`` (default ``run_dir/student.onnx``)."""
    import onnx

    params, meta = read_run(run_dir)
    out = Path(out) if out is not None else Path(run_dir) / ONNX_FILE
    if out.suffix != ".onnx":
        raise InputError(f"--out must end in .onnx, got {out}")
    check_out(out)
    with atomic_path(out) as tmp:
        onnx.save(onnx_model(params, meta), tmp)
    print(f"exported the pixel student of {meta['env']} ({run_dir}) -> {out}")
    return out
