"""``NeuralIKSolver``: IK by iterating a trained policy (the EmbodiChain solver interface's ``NeuralIKSolver``).

The policy is an MLP (``hidden_dims`` with tanh between layers, ``num_arm_joints`` outputs) over the
normalized observation ``[arm joints (N), TCP position (3), TCP quaternion (4), target position (3),
target quaternion (4), last action (N)]`` (``obs_dim = 2N + 14``; quaternions ``xyzw``, ``w >= 0``).
Each of ``max_steps`` steps clips its action to [-1, 1], adds ``action_scale`` times it to the arm
joints and clips them to the limits. A solve succeeds when the TCP ends within ``pos_eps`` metres
and ``rot_eps`` radians of the target.

Checkpoints hold the interface's keys: ``agent/actor_mean.<i>.weight`` (out, in) and
``agent/actor_mean.<i>.bias`` for the MLP's linear layers ``i`` (a ``torch.nn.Sequential``'s
``state_dict`` names: 0, 2, 4, ...), ``obs_normalizer/mean`` and ``obs_normalizer/var`` (obs_dim,).
They are ``.npz`` files (:func:`save_checkpoint` writes one) or the interface's torch ``.pt`` files
(``torch.save`` of nested dicts such as ``{"agent": actor.state_dict(), "obs_normalizer": {"mean":
..., "var": ...}}``, nested keys joined by ``/``), read when PyTorch is installed (imported only
then). This solver keeps :class:`~so101_mjx.ik.solvers.learned_seeds.SO101LearnedSolver` (learned seeds, then LM) as it
is.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import ClassVar

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array

from so101_mjx import _checks as checks, _schema as schema
from so101_mjx._files import atomic_path
from so101_mjx.errors import InputError, MissingFileError
from so101_mjx.ik import iterative as ik, pose as P
from so101_mjx.ik.solvers.chain_config import ChainCfg
from so101_mjx.ik.solvers.chain_solver import CfgSolver
from so101_mjx.robot import rotations as R

_LAYER = re.compile(r"agent/actor_mean\.(\d+)\.(weight|bias)")


@dataclass
class NeuralIKSolverCfg(ChainCfg):
    """Configuration of :class:`NeuralIKSolver` (the EmbodiChain solver interface's ``NeuralIKSolverCfg``).

    Attributes (beyond :class:`~so101_mjx.ik.solvers.config.SolverCfg`'s): checkpoint_path (``.npz`` or ``.pt``, see
    the module docstring), max_steps (policy steps per solve), action_scale (radians per unit action),
    obs_dim (None = ``2 * num_arm_joints + 14``), num_arm_joints (the joints the policy moves, the first
    of the chain: the SO-101's 5 by default; the interface's default, 7, is the Franka's),
    hidden_dims, pos_eps (metres), rot_eps (radians), num_samples (starts per target).
    """

    solver_class: ClassVar[type | None] = None  # set below

    class_type: str = "NeuralIKSolver"
    checkpoint_path: str = ""
    max_steps: int = 30
    action_scale: float = 0.2
    obs_dim: int | None = None
    num_arm_joints: int = 5
    hidden_dims: list[int] = field(default_factory=lambda: [256, 256])
    pos_eps: float = 0.01
    rot_eps: float = 0.1
    num_samples: int = 1

    def __post_init__(self) -> None:
        super().__post_init__()
        if not isinstance(self.checkpoint_path, (str, os.PathLike)):
            raise InputError("checkpoint_path must be a path to an .npz or .pt checkpoint, got "
                             f"{self.checkpoint_path!r}")
        self.checkpoint_path = os.fspath(self.checkpoint_path)
        i, r = checks.integer, checks.real
        self.max_steps, self.num_samples = (i("max_steps", self.max_steps, ge=1),
                                            i("num_samples", self.num_samples, ge=1))
        self.num_arm_joints = i("num_arm_joints", self.num_arm_joints, ge=1)
        self.obs_dim = None if self.obs_dim is None else i("obs_dim", self.obs_dim, ge=1)
        self.hidden_dims = [i("hidden_dims", h, ge=1) for h in self.hidden_dims]
        self.action_scale = r("action_scale", self.action_scale, gt=0)
        self.pos_eps, self.rot_eps = r("pos_eps", self.pos_eps, gt=0), r("rot_eps", self.rot_eps, gt=0)

    def solver_kwargs(self) -> dict:
        return dict(pos_eps=self.pos_eps, rot_eps=self.rot_eps, iterations=self.max_steps, num_samples=self.num_samples,
                    seed_selection=False, approach_axis=ik.APPROACH_AXIS)


def save_checkpoint(path: str | os.PathLike, layers, obs_mean, obs_var) -> None:
    """Write a policy checkpoint: ``layers`` a list of (weight (out, in), bias (out,)) pairs, input
    first; ``obs_mean`` / ``obs_var`` (obs_dim,) the observation normalizer."""
    arrays = {"obs_normalizer/mean": np.asarray(obs_mean, np.float32),
              "obs_normalizer/var": np.asarray(obs_var, np.float32)}
    for k, (w, b) in enumerate(layers):
        arrays[f"agent/actor_mean.{2 * k}.weight"] = np.asarray(w, np.float32)
        arrays[f"agent/actor_mean.{2 * k}.bias"] = np.asarray(b, np.float32)
    with atomic_path(path) as tmp, open(tmp, "wb") as file:
        np.savez(file, **arrays)  # type: ignore[arg-type]  # numpy's stub: **arrays could name allow_pickle


def read_torch_checkpoint(path: str) -> dict[str, np.ndarray]:
    """The tensors of a torch checkpoint (``.pt``), nested dicts flattened to ``outer/inner`` keys (so
    ``{"agent": {"actor_mean.0.weight": ...}}`` gives ``agent/actor_mean.0.weight``); other entries skipped."""
    try:
        import torch
    except ImportError:
        raise ImportError(f"checkpoint_path {path!r}: reading a .pt checkpoint needs PyTorch: pip install torch "
                          "(or convert it to .npz where torch is installed, docs/ik.md)") from None
    flat: dict[str, np.ndarray] = {}

    def walk(prefix: str, obj) -> None:
        if isinstance(obj, Mapping):
            for key, value in obj.items():
                walk(f"{prefix}/{key}" if prefix else str(key), value)
        elif isinstance(obj, torch.Tensor):
            flat[prefix] = obj.detach().cpu().numpy()

    walk("", torch.load(path, map_location="cpu", weights_only=True))
    return flat


def load_checkpoint(path: str, obs_dim: int, hidden_dims: list[int], num_arm_joints: int):
    """``(layers, mean, var)`` of a checkpoint: KeyError (as the interface) for missing ``agent/actor_mean.*``
    or ``obs_normalizer`` entries; InputError for shapes that do not match the config or bad values."""
    try:
        if str(path).lower().endswith((".pt", ".pth")):
            files = read_torch_checkpoint(path)
        else:
            with np.load(path, allow_pickle=False) as data:
                files = dict(data)
    except FileNotFoundError:
        raise MissingFileError(f"checkpoint_path: file not found: {path!r}") from None
    except ImportError:
        raise
    except Exception as err:  # zip, pickle, ...: not a saved checkpoint
        raise InputError(f"checkpoint_path {path!r}: unreadable checkpoint ({type(err).__name__})") from None
    found: dict[int, dict[str, np.ndarray]] = {}
    for key in files:
        m = _LAYER.fullmatch(key)
        if m:
            found.setdefault(int(m[1]), {})[m[2]] = files[key]
    if not found:
        raise KeyError(f"checkpoint {path!r} has no 'agent/actor_mean.*' entries; keys: {sorted(files)}")
    for key in ("obs_normalizer/mean", "obs_normalizer/var"):
        if key not in files:
            raise KeyError(f"checkpoint {path!r} is missing {key!r}; keys: {sorted(files)}")
    sizes = [obs_dim, *hidden_dims, num_arm_joints]
    if len(found) != len(sizes) - 1:
        raise InputError(f"checkpoint {path!r}: {len(found)} linear layers, hidden_dims {hidden_dims} needs "
                         f"{len(sizes) - 1}")
    layers = []
    for k, index in enumerate(sorted(found)):
        shapes = {"weight": (sizes[k + 1], sizes[k]), "bias": (sizes[k + 1],)}
        if set(found[index]) != set(shapes):
            raise InputError(f"checkpoint {path!r}: layer actor_mean.{index} needs a weight and a bias")
        layers.append(tuple(jnp.asarray(schema.array(path, f"agent/actor_mean.{index}.{n}", found[index][n], shape=s))
                            for n, s in shapes.items()))
    mean = schema.array(path, "obs_normalizer/mean", files["obs_normalizer/mean"], shape=(obs_dim,))
    var = schema.array(path, "obs_normalizer/var", files["obs_normalizer/var"], shape=(obs_dim,))
    if np.any(var < 0):
        raise InputError(f"checkpoint {path!r}: obs_normalizer/var must be >= 0")
    return tuple(layers), jnp.asarray(mean), jnp.asarray(var)


@dataclass(frozen=True)
class _Static:
    site: str
    arm: int
    steps: int
    scale: float
    pos_eps: float
    rot_eps: float


@partial(jax.jit, static_argnums=(0, 1))
def _run_policy(kin, st: _Static, layers, mean, var, q, target, lower, upper, tcp) -> tuple[Array, Array]:
    """``st.steps`` policy steps from joints ``q`` (B, n) towards TCP poses ``target`` (B, 4, 4):
    success (B,) and joints (B, n). A non-finite target leaves its seed and fails."""
    finite = jnp.all(jnp.isfinite(target), (-2, -1))
    goal_pos, goal_rot = target[..., :3, 3], target[..., :3, :3]
    goal = jnp.concatenate([goal_pos, P.matrix_to_quat(goal_rot)], -1)
    n = st.arm

    def tcp_pose(q):
        pos, rot = kin.site_pose(q, st.site)
        return pos + rot @ tcp[:3, 3], rot @ tcp[:3, :3]

    def step(_, carry):
        q, last = carry
        pos, rot = tcp_pose(q)
        obs = jnp.concatenate([q[..., :n], pos, P.matrix_to_quat(rot), goal, last], -1)
        x = ((obs - mean) / (jnp.sqrt(var) + 1e-8)).astype(layers[0][0].dtype)
        for w, b in layers[:-1]:
            x = jnp.tanh(x @ w.T + b)
        action = jnp.clip(x @ layers[-1][0].T + layers[-1][1], -1.0, 1.0).astype(q.dtype)
        arm = jnp.clip(q[..., :n] + action * st.scale, lower[:n], upper[:n])
        return q.at[..., :n].set(arm), action

    q_end, _ = jax.lax.fori_loop(0, st.steps, step, (q, jnp.zeros((*q.shape[:-1], n), q.dtype)))
    q_end = jnp.where(finite[..., None], q_end, q)
    pos, rot = tcp_pose(q_end)
    ok = (jnp.linalg.norm(pos - goal_pos, axis=-1) < st.pos_eps) & (R.rotation_angle(rot, goal_rot) < st.rot_eps)
    return ok & finite, q_end


class NeuralIKSolver(CfgSolver):
    """IK by iterative inference of a trained policy; FK, Jacobian, TCP and limits as
    :class:`~so101_mjx.ik.solvers.solver.SO101Solver`'s. See the module docstring.

    Attributes: ``obs_dim``, ``layers`` ((weight, bias) pairs), ``obs_mean`` / ``obs_var``.
    """

    cfg_class = NeuralIKSolverCfg

    def __init__(self, cfg: NeuralIKSolverCfg | None = None, device=None, **kwargs):
        super().__init__(cfg, device, **kwargs)
        c = self.cfg
        if c.num_arm_joints > self.dof:
            raise InputError(f"num_arm_joints must be <= the chain's {self.dof} joints, got {c.num_arm_joints}")
        self.obs_dim = 2 * c.num_arm_joints + 14 if c.obs_dim is None else c.obs_dim
        if self.obs_dim != 2 * c.num_arm_joints + 14:
            raise InputError(f"obs_dim must be 2 * num_arm_joints + 14 = {2 * c.num_arm_joints + 14} (or None), "
                             f"got {c.obs_dim}")
        self.layers, self.obs_mean, self.obs_var = load_checkpoint(c.checkpoint_path, self.obs_dim, c.hidden_dims,
                                                                   c.num_arm_joints)
        self._rng = np.random.default_rng(0)

    def get_ik(self, target_xpos, qpos_seed=None, num_samples: int | None = None, **kwargs):
        """Solve (4, 4) or (B, 4, 4) TCP targets from ``qpos_seed`` ((n,) or (B, n); default zeros).

        ``num_samples`` (default ``num_samples`` of the config) > 1 adds uniform random starts within
        the limits after the seed. Returns success (B,) (any start succeeded) and joints (B, 1, n):
        the successful solution nearest the seed (by ``ik_nearest_weight``), else the seed's run; with
        ``return_all_solutions=True`` every start's joints (B, num_samples, n).
        """
        t = jnp.asarray(target_xpos)
        t = t[None] if t.ndim == 2 else t
        if t.ndim != 3 or t.shape[1:] != (4, 4):
            raise InputError(f"target_xpos must have shape (4, 4) or (B, 4, 4), got {jnp.shape(target_xpos)}")
        t = t if jnp.issubdtype(t.dtype, jnp.floating) else t.astype(jnp.result_type(float))
        b, dt = t.shape[0], t.dtype
        seed = jnp.zeros(self.dof, dt) if qpos_seed is None else self._q(qpos_seed).astype(dt)
        if seed.shape not in ((self.dof,), (b, self.dof)):
            raise InputError(f"qpos_seed must have shape ({self.dof},) or ({b}, {self.dof}), got {seed.shape}")
        seed = jnp.broadcast_to(jnp.where(jnp.isfinite(seed), seed, 0.0), (b, self.dof))
        n = self._check_samples(self.num_samples if num_samples is None else num_samples)
        lo, hi = (np.where(np.isfinite(x), x, s * np.pi) for x, s in ((self._lower, -1), (self._upper, 1)))
        starts = jnp.concatenate([seed[:, None], jnp.asarray(self._rng.uniform(lo, hi, (b, n - 1, self.dof)), dt)], 1)
        st = _Static(self._cfg.site, self.cfg.num_arm_joints, self._cfg.iterations, self.cfg.action_scale,
                     self._cfg.pos_eps, self._cfg.rot_eps)
        ok, q = _run_policy(self.kin, st, self.layers, self.obs_mean, self.obs_var, starts.reshape(-1, self.dof),
                            jnp.repeat(t, n, 0), jnp.asarray(self._lower, dt), jnp.asarray(self._upper, dt),
                            jnp.asarray(self._tcp, dt))
        ok, q = ok.reshape(b, n), q.reshape(b, n, self.dof)
        if kwargs.get("return_all_solutions", False):
            return ok.any(1), q
        dist = jnp.where(ok, jnp.sum(jnp.asarray(self._weight, dt) * (q - seed[:, None]) ** 2, -1), jnp.inf)
        best = jnp.argmin(dist, 1)
        return ok.any(1), q[jnp.arange(b), best][:, None, :]


NeuralIKSolverCfg.solver_class = NeuralIKSolver
