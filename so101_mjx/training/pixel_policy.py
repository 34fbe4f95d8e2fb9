"""A distilled pixel student as ONNX, and pixel policies as ``(pixels, agent_pos) -> actions`` functions.

``so101-mjx export DISTILL_DIR`` (a directory with ``distill.json`` and ``student.npz``, written
by ``so101-mjx distill``) writes ``student.onnx`` beside them: opset 17, built node by node with
``onnx.helper`` (no torch), inputs ``pixels`` (batch, H, W, 3) uint8 and ``agent_pos`` (batch, 14)
float32, output ``actions`` (batch, 4) float32 in the env's action space (``[dx, dy, dz]`` in
[-1, 1], grasp in [0, 1]): :class:`PixelStudent`'s forward pass, its
convolutions in ONNX's NCHW layout inside the graph. Metadata ``so101_mjx``: ``kind`` "pixel",
the env id and env config (``image_size``, ``image_quality``), the teacher and the library version.

:func:`load` runs such a file in onnxruntime, or its ``student.npz`` with flax when onnxruntime is
missing; :func:`is_pixel_policy` tells a pixel export from a state one.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
from jax import Array

from so101_mjx._files import atomic_path
from so101_mjx.envs.arm import AGENT_POS_SIZE
from so101_mjx.errors import InputError
from so101_mjx.training.onnx_graph import METADATA_KEY, graph_model

KIND = "pixel"
STUDENT_FILE, META_FILE, ONNX_FILE = "student.npz", "distill.json", "student.onnx"
PixelPolicy = Callable[[np.ndarray, np.ndarray], np.ndarray]  # (pixels (B, H, W, 3) uint8, agent_pos (B, 14)) -> (B, 4)
CONV_KERNELS, CONV_STRIDES = (8, 4, 3), (4, 2, 1)  # PixelStudent's convolutions (also its ONNX graph's)


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
    ValueError naming the missing or unusable file."""
    run_dir = Path(run_dir)
    for name in (STUDENT_FILE, META_FILE):
        if not (run_dir / name).is_file():
            raise InputError(f"{run_dir} is not a distill directory: {name} is missing")
    try:
        run = json.loads((run_dir / META_FILE).read_text())
        env, env_config = run["env"], dict(run["env_config"])
        with np.load(run_dir / STUDENT_FILE) as z:
            params = {k: z[k] for k in z.files}
    except Exception as err:  # JSON, key or zip errors
        raise InputError(f"{run_dir}: unreadable distill output: {err!r}") from None
    if not all(np.all(np.isfinite(v)) for v in params.values()):
        raise InputError(f"{run_dir / STUDENT_FILE}: the student's weights are not all finite")
    from so101_mjx import __version__
    from so101_mjx.envs.registry import task

    meta = {"kind": KIND, "env": env, "env_config": env_config, "teacher": run.get("teacher"), "version": __version__,
            "inputs": f"pixels (batch, {env_config['image_size']}, {env_config['image_size']}, 3) uint8 from the front camera; "
                      f"agent_pos (batch, {AGENT_POS_SIZE}) float32",
            "action_layout": task(env).action_layout}
    return params, meta


def _layers(params: dict[str, np.ndarray], kind: str) -> list[tuple[np.ndarray, np.ndarray]]:
    """``(kernel, bias)`` of ``Conv_i`` / ``Dense_i`` in order."""
    out, i = [], 0
    while f"params/{kind}_{i}/kernel" in params:
        out.append((params[f"params/{kind}_{i}/kernel"], params[f"params/{kind}_{i}/bias"]))
        i += 1
    return out


def _dense(params: dict[str, np.ndarray]) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """``(head, hidden)`` ``(kernel, bias)``: in ``nn.Dense(4)(relu(nn.Dense(hidden)(x)))`` flax builds
    (and numbers) the head first, ``Dense_0``; ValueError unless the hidden layer feeds the head."""
    layers = _layers(params, "Dense")
    if len(layers) != 2 or layers[1][0].shape[1] != layers[0][0].shape[0] or layers[0][0].shape[1] != 4:
        raise InputError(f"student params must hold a hidden Dense layer feeding a 4-action head, got shapes {[k.shape for k, _ in layers]}")
    return layers[0], layers[1]


def onnx_model(params: dict[str, np.ndarray], meta: dict[str, Any]):
    """The student as an ``onnx.ModelProto`` (checked)."""
    from onnx import TensorProto, helper, numpy_helper

    inits, nodes = [], []

    def const(name: str, value, dtype=np.float32) -> str:
        inits.append(numpy_helper.from_array(np.asarray(value, dtype), name))
        return name

    def node(op: str, inputs: list[str], name: str, **attrs) -> str:
        nodes.append(helper.make_node(op, inputs, [name], name=name, **attrs))
        return name

    convs, (head, hidden) = _layers(params, "Conv"), _dense(params)
    if len(convs) != len(CONV_STRIDES):
        raise InputError(f"student params must hold {len(CONV_STRIDES)} Conv layers, got {len(convs)}")
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
    size = int(meta["env_config"]["image_size"])
    graph = helper.make_graph(
        nodes, "so101_mjx_pixel_student",
        [helper.make_tensor_value_info("pixels", TensorProto.UINT8, ["batch", size, size, 3]),
         helper.make_tensor_value_info("agent_pos", TensorProto.FLOAT, ["batch", AGENT_POS_SIZE])],
        [helper.make_tensor_value_info("actions", TensorProto.FLOAT, ["batch", 4])],
        inits,
    )
    return graph_model(graph, meta)


def export(run_dir: str | Path, out: str | Path | None = None) -> Path:
    """Write the student of distill directory ``run_dir`` to ``out`` (default ``run_dir/student.onnx``)."""
    import onnx

    params, meta = read_run(run_dir)
    out = Path(out) if out is not None else Path(run_dir) / ONNX_FILE
    if out.suffix != ".onnx":
        raise InputError(f"--out must end in .onnx, got {out}")
    with atomic_path(out) as tmp:
        onnx.save(onnx_model(params, meta), tmp)
    print(f"exported the pixel student of {meta['env']} ({run_dir}) -> {out}")
    return out


def is_pixel_policy(path: str | Path) -> bool:
    """Whether ``path`` is a pixel export: a ``student.onnx`` graph with a ``pixels`` input or a distill ``student.npz``."""
    path = Path(path)
    if path.suffix == ".npz":
        return path.name == STUDENT_FILE and (path.parent / META_FILE).is_file()
    if path.suffix != ".onnx" or not path.is_file():
        return False
    import onnx

    try:
        graph = onnx.load(str(path), load_external_data=False).graph
    except Exception:  # not ONNX at all: the state loader names the problem
        return False
    return any(i.name == "pixels" for i in graph.input)


def load(path: str | Path) -> tuple[PixelPolicy, dict[str, Any]]:
    """``(policy, metadata)`` of a pixel export (``student.onnx`` in onnxruntime; a distill
    ``student.npz``, or the ``.onnx`` without onnxruntime, via the npz beside it with flax)."""
    path = Path(path)
    if path.suffix == ".onnx":
        import onnx

        meta = json.loads({p.key: p.value for p in onnx.load(str(path)).metadata_props}[METADATA_KEY])
        try:
            import onnxruntime as ort
        except ImportError:
            print(f"onnxruntime is not installed: running {path.with_name(STUDENT_FILE)} with flax")
        else:
            session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
            run = lambda pixels, agent_pos: session.run(  # noqa: E731
                ["actions"], {"pixels": np.asarray(pixels, np.uint8), "agent_pos": np.asarray(agent_pos, np.float32)})[0]
            return run, meta
    params, meta = read_run(path.parent)
    from flax import traverse_util

    channels = tuple(int(kernel.shape[-1]) for kernel, _ in _layers(params, "Conv"))
    student = PixelStudent(channels=channels, hidden=int(_dense(params)[1][0].shape[1]))
    tree = traverse_util.unflatten_dict({tuple(k.split("/")): jnp.asarray(v) for k, v in params.items()})
    apply = jax.jit(student.apply)
    return (lambda pixels, agent_pos: np.asarray(apply(tree, jnp.asarray(pixels, jnp.uint8), jnp.asarray(agent_pos, jnp.float32)))), meta
