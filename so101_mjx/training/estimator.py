"""A pixel student that acts through its teacher: it estimates the teacher's privileged state and the frozen teacher
maps the follower's motor positions and that estimate to the action.

A state teacher observes ``agent_pos`` (what a follower measures) and a privileged rest (in PickCube the block's
position, m); a camera student cannot observe the rest, so it estimates it from its frames. The student's head
outputs that rest standardized (:attr:`Estimator.state_size` entries); the action is the teacher's on
``concat(agent_pos, estimate · estimate_std + estimate_mean)``. Distilling (``so101-mjx distill --student
estimator``) regresses the estimate on the true state of every visited frame: a target of a few numbers with a
meaning in metres, in place of the teacher's whole action (Chen et al., 2019, "Learning by Cheating"; Kumar et al.,
2021, RMA, whose adaptation module regresses a privileged latent for a frozen base policy).

The teacher's arrays are the student's ``teacher`` variable collection (saved as ``teacher/<name>`` in
``student.npz``, ONNX initializers ``teacher_<name>``): the teacher's observation normalizer ``obs_mean`` /
``obs_std``, its layers ``kernel_<i>`` / ``bias_<i>``, its action map ``action_scale`` / ``action_offset``, and the
estimate's ``estimate_mean`` / ``estimate_std``; with ``origin="gripper"`` the gripper point's kinematic chain
(:func:`origin_arrays`, names ``origin_*``).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

import numpy as np

from so101_mjx import _schema as schema
from so101_mjx.errors import InputError
from so101_mjx.robot.rotations import skew
from so101_mjx.training.policy import ACTIVATIONS, PolicyWeights, forward

if TYPE_CHECKING:
    from so101_mjx.robot.kinematics import Kinematics

MAX_LAYERS, MAX_WIDTH = 16, 4096  # a teacher MLP's depth and width a student's metadata may declare (a header check)
MAX_CHAIN = 16  # bodies in the gripper point's kinematic chain a student's metadata may declare (a header check)
COLLECTION = "teacher"  # the flax variable collection; its arrays flattened as "teacher/<name>"
ORIGINS = ("world", "gripper")  # what the estimated positions are relative to
ORIGIN_SITE = "gripperframe"  # the gripper point of origin="gripper"


def split(params: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(the student's own params, the teacher arrays by name)`` of params flattened by '/'-joined path."""
    prefix = COLLECTION + "/"
    return ({k: v for k, v in params.items() if not k.startswith(prefix)},
            {k[len(prefix):]: v for k, v in params.items() if k.startswith(prefix)})


@dataclasses.dataclass(frozen=True)
class Estimator:
    """The shape of an estimating student's teacher: ``state_size`` privileged entries estimated, the teacher MLP's
    widths ``layers`` (agent_pos + state_size in, its hidden layers, 2 × actions out) and its ``activation``; the
    estimate's ``origin`` (``"gripper"``: positions relative to the gripper point, whose kinematic chain has
    ``chain`` bodies)."""

    state_size: int
    layers: tuple[int, ...]
    activation: str
    origin: str = "world"
    chain: int = 0

    def __post_init__(self) -> None:
        if not (isinstance(self.state_size, int) and 0 < self.state_size < MAX_WIDTH):
            raise InputError(f"estimator.state_size must be an integer in 1..{MAX_WIDTH - 1}, got {self.state_size!r}")
        if not (2 <= len(self.layers) <= MAX_LAYERS and all(isinstance(w, int) and 0 < w <= MAX_WIDTH
                                                           for w in self.layers) and self.layers[-1] % 2 == 0):
            raise InputError(f"estimator.layers must be 2 to {MAX_LAYERS} widths in 1..{MAX_WIDTH}, the last even "
                             f"(2 x actions), got {self.layers!r}")
        if self.activation not in ACTIVATIONS:
            raise InputError(f"estimator.activation must be one of {sorted(ACTIVATIONS)}, got {self.activation!r}")
        if self.origin not in ORIGINS:
            raise InputError(f"estimator.origin must be one of {ORIGINS}, got {self.origin!r}")
        if self.origin == "world" and self.chain != 0:
            raise InputError(f"estimator.chain must be 0 with origin 'world', got {self.chain!r}")
        if self.origin == "gripper" and not (self.state_size % 3 == 0 and isinstance(self.chain, int)
                                             and 1 <= self.chain <= MAX_CHAIN):
            raise InputError(f"estimator.origin 'gripper' needs positions (a state_size divisible by 3, got "
                             f"{self.state_size}) and a chain of 1 to {MAX_CHAIN} bodies (got {self.chain!r})")

    @classmethod
    def of(cls, value: Any, source: str) -> Estimator:
        """From its JSON form (``{"state_size", "layers", "activation"}``); InputError naming ``source``."""
        schema.fields(source, value, {"state_size": schema.integer(1), "layers": schema.list_of(schema.integer(1)),
                                      "activation": schema.STRING, "origin": schema.optional(schema.STRING),
                                      "chain": schema.optional(schema.integer(0))}, where="estimator.")
        try:
            return cls(value["state_size"], tuple(value["layers"]), value["activation"],
                       value.get("origin") or "world", value.get("chain") or 0)
        except InputError as err:
            raise InputError(f"{source}: {err}") from None

    @classmethod
    def of_teacher(cls, weights: PolicyWeights, agent_pos: int, origin: str = "world", chain: int = 0) -> Estimator:
        """The estimator of a state teacher whose observation is ``agent_pos`` entries, then the privileged rest."""
        if weights.obs_size <= agent_pos:
            raise InputError(f"the teacher observes {weights.obs_size} entries, no privileged state after the "
                             f"{agent_pos} of agent_pos: nothing to estimate")
        return cls(weights.obs_size - agent_pos, (weights.obs_size, *(int(k.shape[1]) for k in weights.kernels)),
                   weights.activation, origin, chain)

    def as_json(self) -> dict[str, Any]:
        """The metadata form; ``origin`` and ``chain`` only when the origin is the gripper (the older form else)."""
        own = {} if self.origin == "world" else {"origin": self.origin, "chain": self.chain}
        return {"state_size": self.state_size, "layers": list(self.layers), "activation": self.activation, **own}

    @property
    def agent_pos(self) -> int:
        return self.layers[0] - self.state_size

    @property
    def actions(self) -> int:
        return self.layers[-1] // 2

    def shapes(self) -> dict[str, tuple[int, ...]]:
        """The teacher collection's arrays (name -> shape)."""
        obs, actions = self.layers[0], self.actions
        layers = {f"{kind}_{i}": (w_in, w_out) if kind == "kernel" else (w_out,)
                  for i, (w_in, w_out) in enumerate(zip(self.layers, self.layers[1:])) for kind in ("kernel", "bias")}
        chain = {} if self.origin == "world" else {
            "origin_motor_gain": (self.agent_pos,), "origin_motor_offset": (self.agent_pos,),
            "origin_select": (self.chain, self.agent_pos), "origin_qpos0": (self.chain,),
            "origin_body_pos": (self.chain, 3), "origin_body_rot": (self.chain, 3, 3),
            "origin_axis_skew": (self.chain, 3, 3), "origin_anchor": (self.chain, 3), "origin_root_pos": (3,),
            "origin_root_rot": (3, 3), "origin_point": (3,)}
        return {"obs_mean": (obs,), "obs_std": (obs,), **layers, "action_scale": (actions,),
                "action_offset": (actions,), "estimate_mean": (self.state_size,), "estimate_std": (self.state_size,),
                **chain}


def origin_arrays(kin: Kinematics, motor_gain: np.ndarray, motor_offset: np.ndarray,
                  site: str = ORIGIN_SITE) -> dict[str, np.ndarray]:
    """The gripper point's kinematic chain as arrays (float32): the bodies from ``kin``'s root to ``site``'s body,
    each with its offset in its parent (``origin_body_pos`` (K, 3), ``origin_body_rot`` (K, 3, 3)), its hinge
    (``origin_axis_skew`` (K, 3, 3), the cross-product matrix of the axis, zero for a fixed body;
    ``origin_anchor`` (K, 3); ``origin_qpos0`` (K,); ``origin_select`` (K, P), which motor turns it), the
    root's world pose and the site's offset in its body (``origin_point``); and the motor map ``motor = gain · q +
    offset`` (P,) of :mod:`so101_mjx.robot.motors` that turns ``agent_pos`` back into joint angles."""
    body = kin.site_body[kin.site_id(site)]
    path = []
    while body >= 0:
        path.append(body)
        body = kin.body_parent[body]
    path.reverse()
    select = np.zeros((len(path), len(motor_gain)))
    axes = np.zeros((len(path), 3))
    for k, b in enumerate(path):
        if kin.body_joint[b] >= 0:
            select[k, kin.body_joint[b]] = 1.0  # kin.joints are the motors' first entries, in order
        if kin.body_joint[b] != -1:
            axes[k] = kin.joint_axis[b]
    arrays = {"origin_motor_gain": motor_gain, "origin_motor_offset": motor_offset, "origin_select": select,
              "origin_qpos0": np.where([kin.body_joint[b] != -1 for b in path], kin.joint_qpos0[path], 0.0),
              "origin_body_pos": kin.body_pos[path], "origin_body_rot": kin.body_rot[path],
              "origin_axis_skew": np.asarray(skew(axes)),
              "origin_anchor": kin.joint_anchor[path] * (axes != 0).any(1, keepdims=True),
              "origin_root_pos": kin.root_pos, "origin_root_rot": kin.root_rot,
              "origin_point": kin.site_pos[kin.site_id(site)]}
    return {name: np.asarray(value, np.float32) for name, value in arrays.items()}


def gripper_point(arrays: dict[str, Any], agent_pos: Any, xp: Any = np) -> Any:
    """World position (..., 3) m of the gripper point at the motor positions ``agent_pos`` (..., P), by the chain
    in ``arrays`` (:func:`origin_arrays`): MuJoCo's composition, each body's offset, then its hinge's rotation
    ``I + sin(a) S + (1 - cos(a)) S²`` about its anchor (Rodrigues; exactly the identity for a fixed body)."""
    q = (agent_pos - arrays["origin_motor_offset"]) / arrays["origin_motor_gain"]
    angles = q @ xp.swapaxes(arrays["origin_select"], 0, 1) - arrays["origin_qpos0"]
    pos, rot = arrays["origin_root_pos"], arrays["origin_root_rot"]
    skews = arrays["origin_axis_skew"]
    for k in range(skews.shape[0]):
        pos = pos + _apply(rot, arrays["origin_body_pos"][k], xp)
        rot = rot @ arrays["origin_body_rot"][k]
        anchor = pos + _apply(rot, arrays["origin_anchor"][k], xp)
        s, c = xp.sin(angles[..., k])[..., None, None], xp.cos(angles[..., k])[..., None, None]
        rot = rot @ (xp.eye(3, dtype=skews.dtype) + s * skews[k] + (1 - c) * (skews[k] @ skews[k]))
        pos = anchor - _apply(rot, arrays["origin_anchor"][k], xp)
    return pos + _apply(rot, arrays["origin_point"], xp)


def _apply(rot: Any, v: Any, xp: Any) -> Any:
    """``rot @ v`` for rotations (..., 3, 3) and a vector (3,)."""
    return xp.sum(rot * v, axis=-1)


def teacher_arrays(weights: PolicyWeights, action_scale: np.ndarray, action_offset: np.ndarray,
                   estimate_mean: np.ndarray, estimate_std: np.ndarray,
                   origin: dict[str, np.ndarray] | None = None) -> dict[str, np.ndarray]:
    """The teacher collection (float32) of a teacher's weights and action map, the estimate's standardization and,
    with ``origin="gripper"``, the gripper point's chain (:func:`origin_arrays`)."""
    layers = {f"obs_{name}" if name in ("mean", "std") else name: value for name, value in weights.arrays().items()}
    arrays = {**layers, "action_scale": action_scale, "action_offset": action_offset,
              "estimate_mean": estimate_mean, "estimate_std": estimate_std, **(origin or {})}
    return {name: np.asarray(value, np.float32) for name, value in arrays.items()}


def variables(module: Any, estimator: Estimator) -> dict[str, Any]:
    """The teacher collection's values within flax ``module`` (created at init: ones for the standard deviations and
    the motor gains, zeros for the rest, until the teacher's arrays replace them)."""
    import jax.numpy as jnp

    return {name: module.variable(COLLECTION, name, jnp.ones if name.endswith(("std", "gain")) else jnp.zeros,
                                  shape).value for name, shape in estimator.shapes().items()}


def teacher_weights(arrays: dict[str, Any], estimator: Estimator) -> PolicyWeights:
    """The teacher's :class:`PolicyWeights` within a teacher collection (numpy or JAX arrays)."""
    n = len(estimator.layers) - 1
    return PolicyWeights(arrays["obs_mean"], arrays["obs_std"], tuple(arrays[f"kernel_{i}"] for i in range(n)),
                         tuple(arrays[f"bias_{i}"] for i in range(n)), estimator.activation)


def origin_of(arrays: dict[str, Any], estimator: Estimator, agent_pos: Any, xp: Any = np) -> Any:
    """What the estimated state is relative to (..., state_size): the gripper point at ``agent_pos`` (..., P) once per
    position (``origin="gripper"``), or 0."""
    if estimator.origin == "world":
        return 0.0
    point = gripper_point(arrays, agent_pos, xp)
    return xp.concatenate([point] * (estimator.state_size // 3), axis=-1)


def estimated_state(arrays: dict[str, Any], estimator: Estimator, agent_pos: Any, estimate: Any, xp: Any = np) -> Any:
    """The privileged state (..., state_size) the standardized ``estimate`` stands for at ``agent_pos``."""
    state = estimate * arrays["estimate_std"] + arrays["estimate_mean"]
    return state + origin_of(arrays, estimator, agent_pos.astype(state.dtype), xp)


def act(arrays: dict[str, Any], estimator: Estimator, agent_pos: Any, estimate: Any, xp: Any = np) -> Any:
    """The teacher's action ``(..., actions)`` on ``agent_pos`` (..., P) and the standardized ``estimate``
    (..., state_size), in array module ``xp``."""
    state = estimated_state(arrays, estimator, agent_pos, estimate, xp)
    obs = xp.concatenate([agent_pos.astype(state.dtype), state], axis=-1)
    return forward(teacher_weights(arrays, estimator), obs, arrays["action_scale"], arrays["action_offset"], xp)


def check(arrays: dict[str, np.ndarray], estimator: Estimator, source: str) -> None:
    """InputError naming ``source`` and the array unless ``arrays`` is the teacher collection ``estimator``
    describes: every array, their shapes, finite float32, positive standard deviations."""
    shapes = estimator.shapes()
    if set(arrays) != set(shapes):
        raise InputError(f"{source}: the teacher arrays must be {sorted(shapes)}, got {sorted(arrays)}")
    for name, shape in shapes.items():
        value = schema.array(source, f"teacher/{name}", arrays[name], dtype="float32")
        if value.shape != shape:
            raise InputError(f"{source}: teacher/{name} has shape {value.shape}, expected {shape} (estimator "
                             f"{estimator.as_json()})")
    for name in ("obs_std", "estimate_std"):
        if not np.all(arrays[name] > 0):
            raise InputError(f"{source}: teacher/{name} must be positive")
    if estimator.origin == "gripper" and not np.all(arrays["origin_motor_gain"] != 0):
        raise InputError(f"{source}: teacher/origin_motor_gain must be non-zero")


def graph_nodes(arrays: dict[str, np.ndarray], estimator: Estimator, agent_pos: str, head: str, builders) -> None:
    """The ONNX nodes from the student's ``head`` (the standardized estimate) and ``agent_pos`` (float) graph values
    through ``actions``, their names prefixed ``teacher_``: builders ``(const, node)`` of
    :func:`~so101_mjx.training.export.graph_builders` with that prefix."""
    from so101_mjx.training.export import policy_nodes

    const, node = builders
    state = node("Add", [node("Mul", [head, const("estimate_std", arrays["estimate_std"])], "estimate_scaled"),
                         const("estimate_mean", arrays["estimate_mean"])], "estimate")
    if estimator.origin == "gripper":
        point = point_nodes(arrays, agent_pos, builders)
        state = node("Add", [state, node("Concat", [point] * (estimator.state_size // 3), "origin", axis=1)],
                     "estimate_in_world")
    obs = node("Concat", [agent_pos, state], "obs", axis=1)
    policy_nodes(teacher_weights(arrays, estimator), obs, arrays["action_scale"], arrays["action_offset"], builders)


def point_nodes(arrays: dict[str, np.ndarray], agent_pos: str, builders) -> str:
    """ONNX nodes of :func:`gripper_point` on graph value ``agent_pos`` (batch, P): the gripper point (batch, 3).
    Each chain array is one initializer (``origin_<name>``, as in the teacher collection), its bodies gathered from
    it; positions are column vectors (batch, 3, 1); a fixed body's rotation is skipped."""
    const, node = builders
    chain = len(arrays["origin_qpos0"])
    shape = lambda name, dims: const(f"origin_shape_{name}", dims, np.int64)  # noqa: E731
    array = {name: const(name, arrays[name]) for name in arrays if name.startswith("origin_")}
    q = node("Div", [node("Sub", [agent_pos, array["origin_motor_offset"]], "origin_q_centred"),
                     array["origin_motor_gain"]], "origin_q")
    select = node("Transpose", [array["origin_select"]], "origin_select_t", perm=[1, 0])
    angles = node("Sub", [node("MatMul", [q, select], "origin_angles_q"), array["origin_qpos0"]], "origin_angles")
    angles = node("Reshape", [angles, shape("angles", [-1, chain, 1, 1])], "origin_angles_4d")
    sin, one_minus_cos = node("Sin", [angles], "origin_sin"), node(
        "Sub", [const("origin_one", 1.0), node("Cos", [angles], "origin_cos")], "origin_one_minus_cos")

    indices = [const(f"origin_k{k}", k, np.int64) for k in range(chain)]
    column_shape = shape("column", [3, 1])

    def column(name: str, k: int | None = None) -> str:  # a (3,) entry as a (3, 1) column
        value = array[name] if k is None else node("Gather", [array[name], indices[k]], f"{name}_{k}", axis=0)
        return node("Reshape", [value, column_shape], f"{name}_{'' if k is None else k}_column")

    eye = const("origin_eye", np.eye(3))
    pos, rot = column("origin_root_pos"), array["origin_root_rot"]
    for k, index in enumerate(indices):
        pos = node("Add", [pos, node("MatMul", [rot, column("origin_body_pos", k)], f"origin_offset_{k}")],
                   f"origin_body_{k}")
        rot = node("MatMul", [rot, node("Gather", [array["origin_body_rot"], index], f"origin_body_rot_{k}", axis=0)],
                   f"origin_rot_{k}")
        if not arrays["origin_axis_skew"][k].any():  # a fixed body
            continue
        anchor_in_body = column("origin_anchor", k)
        anchor = node("Add", [pos, node("MatMul", [rot, anchor_in_body], f"origin_anchor_offset_{k}")],
                      f"origin_anchor_{k}_world")
        skew = node("Gather", [array["origin_axis_skew"], index], f"origin_skew_{k}", axis=0)
        turn = node("Add", [node("Add", [eye, node(
            "Mul", [node("Gather", [sin, index], f"origin_sin_{k}", axis=1), skew], f"origin_sin_skew_{k}")],
            f"origin_turn_a_{k}"), node(
            "Mul", [node("Gather", [one_minus_cos, index], f"origin_one_minus_cos_{k}", axis=1),
                    node("MatMul", [skew, skew], f"origin_skew2_{k}")], f"origin_cos_skew2_{k}")], f"origin_turn_{k}")
        rot = node("MatMul", [rot, turn], f"origin_rot_{k}_turned")
        pos = node("Sub", [anchor, node("MatMul", [rot, anchor_in_body], f"origin_anchor_back_{k}")],
                   f"origin_body_{k}_turned")
    point = node("Add", [pos, node("MatMul", [rot, column("origin_point")], "origin_point_offset")],
                 "origin_point_column")
    return node("Reshape", [point, shape("point", [-1, 3])], "origin_point_world")
