"""A learned IK seed of the SO-101 (NeuralIK-shaped), refined by a few Levenberg–Marquardt iterations.

The seed network maps a (TCP position ``p``, approach pitch) target to ``heads`` candidate joint
vectors: features ``[(p − center) / scale, ρ / scale_x, cos φ, sin φ, cos pitch, sin pitch]`` (8,)
(``ρ, φ`` the position's horizontal radius and azimuth about the world z axis), a flax.linen MLP
(swish), then ``q = mid + half · tanh(·)``, inside the joint limits by construction. Several
heads cover the IK's several branches (pan forward/back, elbow up/down): one head alone would
average them.

Training (:func:`train`): FK samples of uniform joint configurations within the limits; per
sample, the loss is the smallest over the heads (winner takes all) of
``‖FK(q̂) − p‖ / POS_SCALE + PITCH_WEIGHT · (1 − cos(pitch(q̂) − pitch))``, plus ``SPREAD`` times
its mean over the heads (every head keeps learning). Adam with a cosine-decayed rate, the whole
loop one jitted ``lax.scan``: pure, seeded, no Python loop.

Refinement (:class:`SO101LearnedSolver`): the ``refine`` seeds that miss least (by the training
loss) each take ``iterations`` (1–3 is the point) :func:`so101_mjx.ik.iterative.levenberg_marquardt` steps
on the TCP position and the approach direction, re-aimed every step at the target pitch in the
arm's current plane, so only the pitch is constrained (the approach's azimuth follows the pan,
5 DoF).

FK here is the arm geometry's product of exponentials (:func:`so101_mjx.ik.analytic.forward`),
the chain's FK to round-off. Shapes: positions (..., 3) metres, pitches (...) radians
(:func:`so101_mjx.ik.analytic.pitch_of`), seeds (..., heads, 5) radians in ``ARM_JOINTS`` order.

Use (``so101-mjx bench ik --save-learned seed.npz`` trains and writes one too)::

    kin = Kinematics.from_model(model, ARM_JOINTS)
    net, losses = neural_ik.train(kin, neural_ik.init(kin, *ik.joint_limits(model)))
    neural_ik.save(net, "seed.npz")
    ok, q = neural_ik.SO101LearnedSolver(neural_ik.load("seed.npz"), model).get_ik(positions, pitch=pitches)
"""

from __future__ import annotations

import os
from functools import partial
from typing import TYPE_CHECKING, Any, Self, cast

import flax.linen as nn
import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import optax
from flax import struct, traverse_util
from jax import Array

from so101_mjx import _checks as checks, _schema as schema
from so101_mjx._files import atomic_path
from so101_mjx.errors import InputError, MissingFileError
from so101_mjx.ik import analytic as analytic_ik, iterative as ik
from so101_mjx.ik.solvers.analytic_solver import PitchedSolver
from so101_mjx.ik.solvers.multistart import manipulability
from so101_mjx.robot.kinematics import Kinematics
from so101_mjx.robot.scenes import EE_SITE

HIDDEN = (256, 256)
HEADS = 4
FEATURES = 8  # network inputs: see the module docstring
CPU_BLOCK = 1024  # targets per vectorized block on CPU (measured 1.3-2.6x the whole-batch rate at 65,536)
POS_SCALE = 0.01  # metres of position error per unit of loss
PITCH_WEIGHT = 100.0  # loss per unit of (1 − cos) pitch error
SPREAD = 0.05  # weight of the mean over heads next to their minimum
_NORM_SAMPLES = 4096  # FK samples behind the input normalization
_INVALID = 1e9  # selection cost step: above any weighted squared joint distance


class _MLP(nn.Module):
    hidden: tuple[int, ...]
    outputs: int

    @nn.compact
    def __call__(self, x: Array) -> Array:
        for width in self.hidden:
            x = nn.swish(nn.Dense(width)(x))
        return nn.Dense(self.outputs)(x)


@struct.dataclass
class SeedNet:
    """The seed network: flax ``params`` and everything needed to use them (a JAX pytree).

    ``lower``/``upper`` (5,) the output range (radians; the limits it was built for), ``center``
    (3,) metres and ``scale`` (3,) the input normalization, ``offset`` (3,) the TCP point in the
    ``site`` frame that the positions refer to.
    """

    if TYPE_CHECKING:  # flax.struct.dataclass adds it at runtime

        def replace(self, **changes: Any) -> Self: ...

    params: Any
    lower: Array
    upper: Array
    center: Array
    scale: Array
    offset: Array
    hidden: tuple[int, ...] = struct.field(pytree_node=False)
    heads: int = struct.field(pytree_node=False)
    site: str = struct.field(pytree_node=False)

    def seeds(self, pos: Array, pitch: Array) -> Array:
        """Candidate joints (..., heads, 5) for positions (..., 3) and pitches (...), in their dtype."""
        dt = jnp.result_type(pos, pitch)
        pos, pitch = jnp.asarray(pos, dt), jnp.asarray(pitch, dt)
        radius, azimuth = jnp.hypot(pos[..., 0], pos[..., 1]), jnp.arctan2(pos[..., 1], pos[..., 0])
        polar = [radius / self.scale[0].astype(dt), jnp.cos(azimuth), jnp.sin(azimuth), jnp.cos(pitch), jnp.sin(pitch)]
        x = jnp.concatenate([(pos - self.center.astype(dt)) / self.scale.astype(dt), jnp.stack(polar, -1)], -1)
        params = jax.tree.map(lambda p: p.astype(dt), self.params)
        out = cast(Array, _MLP(self.hidden, 5 * self.heads).apply(params, x))  # no mutable collections: the output
        raw = out.reshape(*x.shape[:-1], self.heads, 5)
        lo, hi = self.lower.astype(dt), self.upper.astype(dt)
        return 0.5 * (lo + hi) + 0.5 * (hi - lo) * jnp.tanh(raw)


def _bounded(lower, upper) -> tuple[np.ndarray, np.ndarray]:
    """Limits (5,) with unbounded joints given ±π."""
    return (np.where(np.isfinite(lower), lower, -np.pi).astype(np.float64),
            np.where(np.isfinite(upper), upper, np.pi).astype(np.float64))


def init(kin: Kinematics, lower, upper, *, site: str = EE_SITE, offset=None, hidden: tuple[int, ...] = HIDDEN,
         heads: int = HEADS, seed: int = 0) -> SeedNet:
    """An untrained :class:`SeedNet` for the TCP at ``offset`` (3,) in the ``site`` frame (None: the
    origin), joint limits ``lower``/``upper`` (5,) radians, ``hidden`` layer widths and ``heads``."""
    hidden = tuple(checks.integer("hidden", h, ge=1) for h in hidden)
    heads = checks.integer("heads", heads, ge=1)
    lo, hi = _bounded(np.asarray(lower, np.float64), np.asarray(upper, np.float64))
    if lo.shape != (kin.nq,) or hi.shape != (kin.nq,) or np.any(lo >= hi):
        raise InputError(f"lower and upper must be ({kin.nq},) limits with lower < upper, got {lo}, {hi}")
    offset = np.zeros(3) if offset is None else np.asarray(offset, np.float64)
    q = np.random.default_rng(seed).uniform(lo, hi, (_NORM_SAMPLES, kin.nq))
    pos = np.asarray(kin.point(q, site, offset), np.float64)
    params = _MLP(hidden, 5 * heads).init(jax.random.PRNGKey(seed), jnp.zeros((1, FEATURES), jnp.float32))
    f32 = lambda x: jnp.asarray(x, jnp.float32)  # noqa: E731
    return SeedNet(params=params, lower=f32(lo), upper=f32(hi), center=f32(pos.mean(0)), scale=f32(pos.std(0)),
                   offset=f32(offset), hidden=hidden, heads=heads, site=site)


def _miss(geom: analytic_ik.ArmGeometry, q: Array, pos: Array, pitch: Array) -> Array:
    """Per-candidate loss (..., K) of joints ``q`` (..., K, 5) for targets ``pos`` (..., 3), ``pitch`` (...)."""
    miss = jnp.sum((analytic_ik.forward(geom, q) - pos[..., None, :]) ** 2, -1)
    tilt = 1 - jnp.cos(analytic_ik.pitch_of(geom, q) - pitch[..., None])
    return jnp.sqrt(miss + POS_SCALE**2 * 1e-6) / POS_SCALE + PITCH_WEIGHT * tilt


def _loss(geom: analytic_ik.ArmGeometry, net: SeedNet, params, q_true: Array) -> Array:
    """Winner-takes-all FK loss (see the module docstring) of sampled joints ``q_true`` (B, 5)."""
    pos, pitch = analytic_ik.forward(geom, q_true), analytic_ik.pitch_of(geom, q_true)
    per_head = _miss(geom, net.replace(params=params).seeds(pos, pitch), pos, pitch)
    return jnp.mean(jnp.min(per_head, -1)) + SPREAD * jnp.mean(per_head)


@partial(jax.jit, static_argnums=(0, 1, 2, 3))
def _fit(geom, steps: int, batch: int, learning_rate: float, net: SeedNet, key: Array) -> tuple[Any, Array]:
    """Trained params and the per-step losses (steps,)."""
    opt = optax.adam(optax.cosine_decay_schedule(learning_rate, steps, alpha=0.01))

    def step(carry, k):
        params, state = carry
        q_true = jax.random.uniform(k, (batch, net.lower.shape[-1]), jnp.float32, net.lower, net.upper)
        loss, grad = jax.value_and_grad(lambda p: _loss(geom, net, p, q_true))(params)
        updates, state = opt.update(grad, state, params)
        return (optax.apply_updates(params, updates), state), loss

    (params, _), losses = jax.lax.scan(step, (net.params, opt.init(net.params)), jax.random.split(key, steps))
    return params, losses


def train(kin: Kinematics, net: SeedNet, *, steps: int = 6000, batch: int = 512, learning_rate: float = 2e-3,
          seed: int = 0) -> tuple[SeedNet, np.ndarray]:
    """``net`` trained for ``steps`` Adam steps on ``batch`` fresh FK samples each; returns the trained
    net and its losses (steps,). Pure: the same arguments give the same net."""
    steps, batch = checks.integer("steps", steps, ge=1), checks.integer("batch", batch, ge=1)
    learning_rate = checks.real("learning_rate", learning_rate, gt=0)
    seed = checks.integer("seed", seed, ge=0)
    geom = analytic_ik.ArmGeometry.from_kinematics(kin, net.site, np.asarray(net.offset, np.float64))
    params, losses = _fit(geom, steps, batch, learning_rate, net, jax.random.PRNGKey(seed))
    return net.replace(params=params), np.asarray(losses)


def save(net: SeedNet, path: str | os.PathLike) -> None:
    """Write ``net`` to ``path`` (``.npz``: the flattened params and the net's description)."""
    flat = {f"params/{k}": np.asarray(v) for k, v in traverse_util.flatten_dict(net.params, sep="/").items()}
    with atomic_path(path) as tmp, open(tmp, "wb") as file:
        np.savez(file, **flat,  # type: ignore[arg-type]  # numpy's stub: **flat could name allow_pickle
                 lower=net.lower, upper=net.upper, center=net.center, scale=net.scale, offset=net.offset,
                 hidden=np.asarray(net.hidden, np.int64), heads=np.int64(net.heads), site=np.str_(net.site))


def load(path: str | os.PathLike) -> SeedNet:
    """The :class:`SeedNet` written by :func:`save`; ValueError naming the file and what is missing,
    mismatched or not finite."""
    source = os.fspath(path)
    try:
        with np.load(path, allow_pickle=False) as data:
            files = dict(data)
    except FileNotFoundError:
        raise MissingFileError(f"SeedNet file not found: {source}") from None
    except Exception as err:  # zip, zlib, pickled objects: not a saved SeedNet
        raise InputError(f"{source}: unreadable SeedNet file ({type(err).__name__})") from None
    keys = ("lower", "upper", "center", "scale", "offset", "hidden", "heads", "site")
    missing = [k for k in keys if k not in files]
    if missing:
        raise InputError(f"{source!r} is not a saved SeedNet: missing {missing}")
    for k in keys[:5]:
        schema.array(source, k, files[k], shape=(5,) if k in ("lower", "upper") else (3,))
    hidden = schema.array(source, "hidden", files["hidden"], kinds="iu", ndim=1)
    heads = schema.array(source, "heads", files["heads"], kinds="iu", shape=())
    site = files["site"]
    if np.any(hidden < 1) or heads < 1 or site.dtype.kind != "U" or site.shape != ():
        raise InputError(f"{source}: hidden {hidden.tolist()} and heads {heads} must be >= 1 and site one string, got "
                         f"{schema.found(site)}")
    params = traverse_util.unflatten_dict({k[len("params/"):]: jnp.asarray(schema.array(source, k, v))
                                           for k, v in files.items()
                                           if k.startswith("params/")}, sep="/")
    net = SeedNet(params=params, **{k: jnp.asarray(files[k], jnp.float32) for k in keys[:5]},
                  hidden=tuple(int(h) for h in hidden), heads=int(heads), site=str(site))
    expected = jax.eval_shape(
        lambda: _MLP(net.hidden, 5 * net.heads).init(jax.random.PRNGKey(0), jnp.zeros((1, FEATURES))))
    got = jax.tree.map(lambda p: jax.ShapeDtypeStruct(p.shape, jnp.float32), params)
    # jax annotates tree.structure with PyTreeDef, a variable alias mypy cannot resolve
    if jax.tree.structure(got) != jax.tree.structure(expected) or any(  # type: ignore[operator]
            a.shape != b.shape for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(expected))):
        raise InputError(f"{os.fspath(path)!r}: params do not match hidden={net.hidden}, heads={net.heads}")
    return net


class SO101LearnedSolver(PitchedSolver):
    """IK of (TCP position, approach pitch) targets: :class:`SeedNet` seeds, then LM steps.

    Args:
        net: the seed network; its ``site`` and TCP ``offset`` must be the solver's.
        model: MjModel holding the arm (default: the ``so101`` scene).
        refine: how many of the net's heads the LM refines: those whose seeds miss least (the
            training loss); the others are dropped. Refining 1 of 4 costs a quarter of the LM
            work and measured 2 points of success less than all 4.
        iterations: LM steps per seed (static).
        pos_eps: metres, rot_eps: radians of pitch: a candidate beyond either is invalid.
        damping: LM damping. selection: ``"nearest"`` (weighted joint distance to the seed, the default)
            or ``"manipulability"`` (the valid candidate with the largest Yoshikawa √det(Jv Jvᵀ); a
            choice only with ``refine`` > 1). Other arguments as
            :class:`~so101_mjx.ik.solvers.analytic_solver.PitchedSolver`.
    """

    def __init__(self, net: SeedNet, model: mujoco.MjModel | None = None, *, refine: int = 1, iterations: int = 2,
                 pos_eps: float = 1e-3, rot_eps: float = 0.05, damping: float = 1e-5, **kwargs):
        if not isinstance(net, SeedNet):
            raise InputError(f"net must be a SeedNet (neural_ik.init / train / load), got {type(net).__name__}")
        if "site" in kwargs and kwargs["site"] != net.site:
            raise InputError(f"site must be the net's {net.site!r}, got {kwargs['site']!r}")
        refine = checks.integer("refine", refine, ge=1, le=net.heads)
        super().__init__(model, site=net.site, iterations=iterations, pos_eps=pos_eps, rot_eps=rot_eps,
                         damping=damping, num_samples=refine, **kwargs)
        self.net = net

    def get_ik(self, target, qpos_seed=None, num_samples: int | None = None, return_all_solutions: bool = False,
               pitch=None):
        """Solve (..., 3) ``target`` positions at ``pitch`` (...) (default ``self.pitch``); returns
        ``(success (...), qpos (..., 5))``, the valid candidate nearest ``qpos_seed`` (default the
        range midpoint; the most manipulable with ``selection="manipulability"``) or else the least missing; with
        ``return_all_solutions`` ``(valid (..., K), qpos (..., K, 5))``, valid first by distance, then by position error
        (K = ``refine``). Non-finite joints are replaced by the clipped seed. ``num_samples`` is
        not used (one candidate per refined head)."""
        t, pose, seed, pitch = self._targets(target, qpos_seed, pitch)
        if pose:
            raise InputError("SO101LearnedSolver takes (..., 3) positions with a pitch, not (..., 4, 4) poses")
        offset = np.asarray(self._tcp[:3, 3], np.float32)
        if not np.allclose(offset, np.asarray(self.net.offset), atol=1e-6):
            raise InputError(f"the net was trained for the TCP offset {np.asarray(self.net.offset)}; the "
                             f"solver's is {offset}")
        dt = t.dtype
        limits = (np.asarray(x, dt) for x in (self._lower, self._upper, self._weight, self._tcp[:3, 3]))
        return _solve(self.kin, self._geometry(), self._cfg, self.num_samples, bool(return_all_solutions), self.net, t,
                      pitch, seed, *limits)


@partial(jax.jit, static_argnums=(0, 1, 2, 3, 4))
def _solve(kin, geom, cfg, refine, all_solutions, net, target, pitch, seed, lower, upper, weight, offset):
    """Validity (..., K) and candidates (..., K, 5) best first, or the best: (...) and (..., 5).

    On CPU more than ``CPU_BLOCK`` targets go through in blocks of that many (the MLP's activations
    stay in cache); otherwise all at once.
    """
    batch = jnp.broadcast_shapes(target.shape[:-1], seed.shape[:-1], pitch.shape)
    flat = (jnp.broadcast_to(target, (*batch, 3)).reshape(-1, 3), jnp.broadcast_to(pitch, batch).reshape(-1),
            jnp.broadcast_to(seed, (*batch, seed.shape[-1])).reshape(-1, seed.shape[-1]))

    def one(args):
        return _solve_one(kin, geom, cfg, refine, all_solutions, net, *args, lower, upper, weight, offset)

    if jax.default_backend() == "cpu" and flat[1].shape[0] > CPU_BLOCK:
        ok, q = jax.lax.map(one, flat, batch_size=CPU_BLOCK)
    else:
        ok, q = jax.vmap(one)(flat)
    return ok.reshape(*batch, *ok.shape[1:]), q.reshape(*batch, *q.shape[1:])


def _solve_one(kin, geom, cfg, refine, all_solutions, net, pos, pitch, seed, lower, upper, weight, offset):
    """:func:`_solve` of one target: ``pos`` (3,), ``pitch`` (), ``seed`` (5,)."""
    q = net.seeds(pos, pitch)
    if refine < net.heads:  # the seeds that miss least
        keep = jax.lax.top_k(-_miss(geom, q, pos, pitch), refine)[1]
        q = q[keep]
    pos_k, pitch_k = pos[None, :], pitch[None]
    for _ in range(cfg.iterations):  # static: 1-3 steps, each aimed at the target pitch in the current plane
        q = ik.levenberg_marquardt(
            kin, q, pos_k, site=cfg.site, offset=offset, approach_axis=0,
            approach_dir=analytic_ik.approach_direction(geom, q[:, 0], pitch_k),
            orientation_weight=cfg.orientation_weight, damping=cfg.damping, iterations=1, tolerance=cfg.tolerance,
            lower=lower, upper=upper)
    err = jnp.linalg.norm(analytic_ik.forward(geom, q) - pos_k, axis=-1)
    tilt = jnp.abs(analytic_ik.wrap(analytic_ik.pitch_of(geom, q) - pitch_k))
    ok = (err < cfg.pos_eps) & (tilt < cfg.rot_eps)
    q = jnp.where(jnp.all(jnp.isfinite(q), -1, keepdims=True), q, jnp.clip(seed, lower, upper)[None, :])
    score = jnp.sum(weight * (q - seed) ** 2, -1)
    if cfg.selection == "manipulability":  # the best-conditioned valid candidate
        score = -manipulability(kin, q, cfg.site, offset)
    cost = jnp.where(ok, score, _INVALID + jnp.nan_to_num(err, nan=_INVALID))
    if all_solutions:
        order = jnp.argsort(cost)
        return ok[order], q[order]
    best = jnp.argmin(cost)
    return ok[best], q[best]
