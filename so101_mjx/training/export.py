"""``so101-mjx export CHECKPOINT --out policy.onnx``: the deterministic policy as ONNX and ``.npz``
(a distill directory's pixel student: :mod:`so101_mjx.training.pixel_policy`).

Both files compute ``actions = to_env_action(tanh(loc))``, ``loc`` being the first half of the
policy MLP's output on ``(obs − mean) / std``: the observation normalizer is baked in and the
output is already in the env's action space, ``[dx, dy, dz]`` in [-1, 1] and ``grasp`` in [0, 1]
(0 closed). They equal Brax's JAX inference function to float32 rounding.

- ONNX (opset 17; no torch: built node by node with ``onnx.helper``): input ``obs`` (batch,
  obs_size) float32, output ``actions`` (batch, 4) float32; metadata ``so101_mjx`` = the run
  metadata JSON (env id, env config with ``action_scale``, obs layout, library version, ...).
- ``.npz``: ``mean``, ``std``, ``kernel_<i>``, ``bias_<i>``, ``activation`` and ``metadata``
  (the same JSON), run by :class:`~so101_mjx.training.policy.NumpyPolicy` with numpy alone (importable from
  here or from :mod:`so101_mjx.training.policy` without JAX).

:func:`so101_mjx.training.policies.load` reads either file back, checked (the ONNX from its initializers, its
graph compared with :func:`policy_graph`'s from them): every command refuses the same files, truncated,
non-finite or edited networks.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from so101_mjx._files import atomic_path, check_out
from so101_mjx.errors import InputError, ParameterError
from so101_mjx.training.onnx_graph import graph_model
from so101_mjx.training.policy import ACTIVATIONS, NumpyPolicy, PolicyWeights

AGENT_POS_LAYOUT = "agent_pos[0:14] = arm qpos (5), arm qvel (5), gripper_pose (1, -1 closed), ee_pos (3)"


def obs_layout(env: str, obs_size: int, env_config: dict[str, Any]) -> str:
    """The flat observation's layout for env ``env`` under ``env_config`` (agent_pos by control mode,
    then the task's ``observation_layout``)."""
    from so101_mjx.envs.arm import JointMode
    from so101_mjx.envs.base import layout_text
    from so101_mjx.envs.registry import task

    joint = JointMode.of(env_config)
    agent, size = (AGENT_POS_LAYOUT, 14) if joint is None else (joint.agent_pos_text, 6)
    return f"{agent}; environment_state[{size}:{obs_size}] = {layout_text(task(env).observation_layout)}"


def metadata(run: dict[str, Any]) -> dict[str, Any]:
    """The run metadata plus the observation and action layouts."""
    from so101_mjx.envs.arm import JointMode
    from so101_mjx.envs.registry import task

    config = run.get("env_config", {})
    joint = JointMode.of(config)
    return {
        **run,
        "obs_layout": obs_layout(run["env"], run["obs_size"], config),
        "action_layout": task(run["env"]).action_layout if joint is None else joint.action_layout,
    }


def onnx_model(weights: PolicyWeights, meta: dict[str, Any], action_scale: np.ndarray, action_offset: np.ndarray):
    """The policy as an ``onnx.ModelProto`` (checked)."""
    return graph_model(policy_graph(weights, action_scale, action_offset), meta)


def policy_graph(weights: PolicyWeights, action_scale: np.ndarray, action_offset: np.ndarray):
    """The policy's ``onnx.GraphProto``: what :func:`onnx_model` writes and :func:`so101_mjx.training.policies.load`
    compares a file with."""
    from onnx import TensorProto, helper

    inits: list = []
    nodes: list = []
    policy_nodes(weights, "obs", action_scale, action_offset, graph_builders(inits, nodes))
    return helper.make_graph(
        nodes, "so101_mjx_policy",
        [helper.make_tensor_value_info("obs", TensorProto.FLOAT, ["batch", weights.obs_size])],
        [helper.make_tensor_value_info("actions", TensorProto.FLOAT, ["batch", weights.action_size])],
        inits,
    )


def graph_builders(inits: list, nodes: list, prefix: str = "") -> tuple[Callable[..., str], Callable[..., str]]:
    """``(const(name, value, dtype=float32), node(op, inputs, name, **attributes))``: each appends an initializer or
    a one-output node named ``prefix + name`` to ``inits`` / ``nodes`` and returns that name; a node named
    ``actions`` keeps its name (the graph's output)."""
    from onnx import helper, numpy_helper

    def const(name: str, value, dtype=np.float32) -> str:
        inits.append(numpy_helper.from_array(np.asarray(value, dtype), prefix + name))
        return prefix + name

    def node(op: str, inputs: list[str], name: str, **attributes) -> str:
        name = name if name == "actions" else prefix + name
        nodes.append(helper.make_node(op, inputs, [name], name=name, **attributes))
        return name

    return const, node


def policy_nodes(weights: PolicyWeights, obs: str, action_scale: np.ndarray, action_offset: np.ndarray,
                 builders: tuple[Callable[..., str], Callable[..., str]]) -> None:
    """The policy's forward pass on graph value ``obs`` (batch, obs_size) through the ``actions`` node, built with
    :func:`graph_builders`' ``(const, node)``."""
    const, node = builders
    x = node("Sub", [obs, const("obs_mean", weights.mean)], "centered")
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
            raise InputError(f"activation must be one of {sorted(ACTIVATIONS)} for ONNX, got {weights.activation!r}")
    bounds = [const(name, [value], np.int64)
              for name, value in (("loc_start", 0), ("loc_end", weights.action_size), ("loc_axis", 1))]
    x = node("Slice", [x, *bounds], "loc")
    x = node("Tanh", [x], "squashed")
    x = node("Mul", [x, const("action_scale", action_scale)], "scaled")
    node("Add", [x, const("action_offset", action_offset)], "actions")


def export(checkpoint_path: str | Path, out: str | Path) -> tuple[Path | None, Path]:
    """Write ``out`` (.onnx) and the ``.npz`` beside it. Returns their paths (ONNX None without onnx)."""
    from so101_mjx.training import checkpoint

    out = Path(out)
    if out.suffix != ".onnx":
        raise ParameterError(f"out must end in .onnx, got {out}", "out")
    npz = out.with_suffix(".npz")
    check_out(out, npz)
    policy, _ = checkpoint.read_policy(checkpoint_path)
    meta, weights, scale, offset = metadata(policy.metadata), policy.weights, policy.scale, policy.offset
    NumpyPolicy(weights, meta, scale, offset).save(npz)
    try:
        import onnx
    except ImportError:
        print(f"onnx is not installed (pip install so101-mjx[export]): wrote only {npz}")
        return None, npz
    with atomic_path(out) as tmp:
        onnx.save(onnx_model(weights, meta, scale, offset), tmp)
    print(f"exported step {meta['step']:,} of {meta['env']} -> {out} and {npz}")
    return out, npz
