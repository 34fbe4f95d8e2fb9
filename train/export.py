"""``so101-mjx export CHECKPOINT --out policy.onnx``: the deterministic policy as ONNX and ``.npz``.

Both files compute ``actions = to_env_action(tanh(loc))``, ``loc`` being the first half of the
policy MLP's output on ``(obs − mean) / std``: the observation normalizer is baked in and the
output is already in the env's action space, ``[dx, dy, dz]`` in [-1, 1] and ``grasp`` in [0, 1]
(0 closed). They equal Brax's JAX inference function to float32 rounding.

- ONNX (opset 17; no torch: built node by node with ``onnx.helper``): input ``obs`` (batch,
  obs_size) float32, output ``actions`` (batch, 4) float32; metadata ``so101_mjx`` = the run
  metadata JSON (env id, env config with ``action_scale``, obs layout, library version, ...).
- ``.npz``: ``mean``, ``std``, ``kernel_<i>``, ``bias_<i>``, ``activation`` and ``metadata``
  (the same JSON), run by :class:`~train.policy.NumpyPolicy` with numpy alone (importable from
  here or from :mod:`train.policy` without JAX).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np

from train.policy import NUMPY_ACTIVATIONS, NumpyPolicy, PolicyWeights

OPSET = 17
METADATA_KEY = "so101_mjx"
AGENT_POS_LAYOUT = "agent_pos[0:14] = arm qpos (5), arm qvel (5), gripper_pose (1, -1 closed), ee_pos (3)"
ENVIRONMENT_STATE_LAYOUT = {
    "SO101Reach-v0": "target (3), target - ee_pos (3)",
    "SO101PickCube-v0": "block_pos (3)",
    "SO101PickPlace-v0": "block_pos (3), goal (3)",
}
def metadata(run: dict[str, Any]) -> dict[str, Any]:
    """The run metadata plus the observation and action layouts."""
    env_state = ENVIRONMENT_STATE_LAYOUT.get(run["env"], "task state")
    return {
        **run,
        "obs_layout": f"{AGENT_POS_LAYOUT}; environment_state[14:{run['obs_size']}] = {env_state}",
        "action_layout": "[dx, dy, dz] in [-1, 1] (x action_scale metres), grasp in [0, 1] (0 closed)",
    }


def onnx_model(weights: PolicyWeights, meta: dict[str, Any], action_scale: np.ndarray, action_offset: np.ndarray):
    """The policy as an ``onnx.ModelProto`` (checked)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    inits, nodes = [], []

    def const(name: str, value) -> str:
        inits.append(numpy_helper.from_array(np.asarray(value, np.float32), name))
        return name

    def node(op: str, inputs: list[str], name: str) -> str:
        nodes.append(helper.make_node(op, inputs, [name], name=name))
        return name

    x = node("Sub", ["obs", const("obs_mean", weights.mean)], "centered")
    x = node("Div", [x, const("obs_std", weights.std)], "normalized")
    last = len(weights.kernels) - 1
    for i, (kernel, bias) in enumerate(zip(weights.kernels, weights.biases)):
        x = node("MatMul", [x, const(f"kernel_{i}", kernel)], f"matmul_{i}")
        x = node("Add", [x, const(f"bias_{i}", bias)], f"dense_{i}")
        if i == last:
            break
        if weights.activation in ("swish", "silu"):
            x = node("Mul", [x, node("Sigmoid", [x], f"sigmoid_{i}")], f"hidden_{i}")
        elif weights.activation in ("relu", "tanh"):
            x = node(weights.activation.capitalize(), [x], f"hidden_{i}")
        else:
            raise ValueError(f"activation must be one of {sorted(NUMPY_ACTIVATIONS)} for ONNX, got {weights.activation!r}")
    for name, value in (("loc_start", 0), ("loc_end", weights.action_size), ("loc_axis", 1)):
        inits.append(numpy_helper.from_array(np.asarray([value], np.int64), name))
    x = node("Slice", [x, "loc_start", "loc_end", "loc_axis"], "loc")
    x = node("Tanh", [x], "squashed")
    x = node("Mul", [x, const("action_scale", action_scale)], "scaled")
    nodes.append(helper.make_node("Add", [x, const("action_offset", action_offset)], ["actions"], name="actions"))

    graph = helper.make_graph(
        nodes, "so101_mjx_policy",
        [helper.make_tensor_value_info("obs", TensorProto.FLOAT, ["batch", weights.obs_size])],
        [helper.make_tensor_value_info("actions", TensorProto.FLOAT, ["batch", weights.action_size])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="so101_mjx")
    model.ir_version = min(model.ir_version, 9)  # readable by onnxruntime >= 1.18
    helper.set_model_props(model, {METADATA_KEY: json.dumps(meta), "env": meta["env"], "version": meta["version"]})
    onnx.checker.check_model(model)
    return model


def export(checkpoint_path: str | Path, out: str | Path) -> tuple[Path | None, Path]:
    """Write ``out`` (.onnx) and the ``.npz`` beside it. Returns their paths (ONNX None without onnx)."""
    from train import checkpoint

    out = Path(out)
    if out.suffix != ".onnx":
        raise ValueError(f"--out must end in .onnx, got {out}")
    run, params = checkpoint.load(checkpoint_path)
    weights = checkpoint.policy_weights(run, params)
    meta = metadata(run)
    scale, offset = run["action_map"]["scale"], run["action_map"]["offset"]
    out.parent.mkdir(parents=True, exist_ok=True)
    npz = out.with_suffix(".npz")
    NumpyPolicy(weights, meta, scale, offset).save(npz)
    try:
        import onnx
    except ImportError:
        print(f"onnx is not installed (pip install so101-mjx[export]): wrote only {npz}")
        return None, npz
    onnx.save(onnx_model(weights, meta, scale, offset), out)
    print(f"exported step {run['step']:,} of {run['env']} -> {out} and {npz}")
    return out, npz


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("checkpoint", help="run directory, its checkpoints/ directory, or one step directory")
    parser.add_argument("--out", default=None, help="ONNX path (default: <run dir>/policy.onnx); the .npz goes beside it")


def run(args: argparse.Namespace) -> int:
    from train import checkpoint

    step_dir = checkpoint.resolve(args.checkpoint)
    export(step_dir, args.out or step_dir.parent.parent / "policy.onnx")
    return 0
