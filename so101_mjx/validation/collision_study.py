"""Finger collision-primitive study: MJX vs MuJoCo C at grasp states, per finger geometry variant.

``python -m so101_mjx.validation.collision_study [--states 32] [--seeds 64] [--mjx-seeds 16]`` (float64).

Every collision geom of the arm is a box, so a grasp is box–box contact, where MJX's collider
returns other contact points than MuJoCo C's. Each variant of :data:`VARIANTS` refits some finger
boxes of ``scenes/so101.xml`` as inscribed primitives (built in memory with ``mujoco.MjSpec``; the
scene files are untouched), and is measured at grasp states of a scripted PickPlace trajectory on
backend ``c`` (the states :func:`so101_mjx.validation.parity.contact_classes` puts in "arm in contact"):

- per primitive pair, the contacts after ``mj_forward`` / ``mjx.forward`` from the same ``qpos``:
  counts, MJX duplicates, and for each C contact matched to the nearest MJX contact of the same
  geom pair, max |Δdist|, |Δpos| and the angle between the normals;
- one control step from the same states with the same solver iterations
  (:func:`so101_mjx.validation.parity.one_step_deviation`, tolerance 0): max |Δqpos|, |Δqvel|;
- scripted PickPlace success over random seeds on ``c`` (and optionally ``mjx``).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from collections.abc import Callable
from typing import Any, cast

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
from jax import Array

from so101_mjx import _compat  # noqa: F401  (before mujoco.mjx: it captures its Warp import failures)

# isort: split
from mujoco import mjx

from so101_mjx.envs.rollout import run_episodes
from so101_mjx.envs.tasks.pick_place import PickPlace, PickPlaceConfig
from so101_mjx.errors import InputError
from so101_mjx.robot import rotations as R
from so101_mjx.robot.scenes import JAW_PADS, scene_path, set_jaw_pads
from so101_mjx.sim.physics import PhysicsState
from so101_mjx.sim.state import State
from so101_mjx.validation import parity

TIPS: tuple[str, ...] = ("fixed_jaw_tip_collision", "moving_jaw_tip_collision")
SCENE = "pick_place"
CONFIG = {"action_scale": 0.025}  # the parity harness's scripted pick-and-place
EPISODE_STEPS = 300
ARM_IN_CONTACT = parity.CONTACT_CLASSES.index("arm in contact")
_COPIED = ("contype", "conaffinity", "condim", "friction", "solref", "solimp", "solmix", "margin", "gap", "priority",
           "group", "rgba")


@dataclasses.dataclass(frozen=True)
class Fit:
    """How a box is refitted: one ``capsule``, or ``count`` (odd) ``sphere``\\ s along its longest axis."""

    shape: str
    count: int = 1

    def __post_init__(self) -> None:
        if self.shape not in ("capsule", "sphere"):
            raise InputError(f"Fit.shape must be 'capsule' or 'sphere', got {self.shape!r}")
        if self.count < 1 or self.count % 2 == 0 or (self.shape == "capsule" and self.count != 1):
            raise InputError("Fit.count must be odd (the middle piece keeps the box's centre and name), and 1 for a "
                             f"capsule, got {self.count!r}")


VARIANTS: dict[str, dict[str, Fit]] = {
    "boxes (today)": {},
    "capsule pads": dict.fromkeys(JAW_PADS, Fit("capsule")),
    "3-sphere pads": dict.fromkeys(JAW_PADS, Fit("sphere", 3)),
    "capsule pads + tips": dict.fromkeys(JAW_PADS + TIPS, Fit("capsule")),
    "3-sphere pads + tips": dict.fromkeys(JAW_PADS + TIPS, Fit("sphere", 3)),
}


def _axis_quat(axis: int) -> np.ndarray:
    """Quaternion turning local z onto local axis ``axis`` (0, 1, 2)."""
    c = np.sqrt(0.5)
    return np.array([[c, 0, c, 0], [c, -c, 0, 0], [1.0, 0, 0, 0]][axis])


def fitted_pieces(size: np.ndarray, pos: np.ndarray, quat: np.ndarray,
                  fit: Fit) -> list[tuple[mujoco.mjtGeom, np.ndarray, np.ndarray, np.ndarray]]:
    """Primitives inscribed in a box (half-sizes ``size`` (3,) m, ``pos`` (3,), ``quat`` (4,) in its body).

    Radius = the shortest half-size, so the pieces touch both box faces normal to that axis (a
    pad's contact face); they span the longest axis. Returns ``(type, size (3,), pos, quat)`` per
    piece, the middle one (at the box centre) first.
    """
    size, pos, quat = (np.asarray(x, np.float64) for x in (size, pos, quat))
    # MJCF quats (5 digits here) are normalized at compile; so are the pieces' offsets
    quat = quat / np.linalg.norm(quat)
    axis, thin = int(np.argmax(size)), int(np.argmin(size))
    if axis == thin:
        raise InputError(f"box size {size} has no longest axis to fit along")
    r = size[thin]
    half = size[axis] - r  # capsule half-length / outer sphere centre offset: ends stay inside the box
    if fit.shape == "capsule":
        q = R.quat_mul_np(quat, _axis_quat(axis))
        return [(mujoco.mjtGeom.mjGEOM_CAPSULE, np.array([r, half, 0.0]), pos, q)]
    direction = R.quat_to_mat_np(quat)[:, axis]
    m = (fit.count - 1) // 2
    offsets = [0.0] + [s * k * half / m for k in range(1, m + 1) for s in (-1, 1)]
    return [(mujoco.mjtGeom.mjGEOM_SPHERE, np.array([r, 0.0, 0.0]), pos + o * direction, quat) for o in offsets]


def variant_model(variant: str, scene: str = SCENE) -> mujoco.MjModel:
    """The scene with ``variant``'s boxes refitted (:func:`fitted_pieces`) and the jaw pads colliding.

    The middle piece keeps the box's name (the grasp point is the pads' midpoint); further
    pieces are ``<name>_<k>`` with the box's contact parameters and collision bits.
    """
    if variant not in VARIANTS:
        raise InputError(f"variant must be one of {list(VARIANTS)}, got {variant!r}")
    spec = mujoco.MjSpec.from_file(str(scene_path(scene)))
    copies: dict[str, str] = {}
    for name, fit in VARIANTS[variant].items():
        g = spec.geom(name)
        if g.type != mujoco.mjtGeom.mjGEOM_BOX or g.alt.type != mujoco.mjtOrientation.mjORIENTATION_QUAT:
            raise InputError(f"geom {name!r} must be a box oriented by quat to be refitted")
        pieces = fitted_pieces(g.size, g.pos, g.quat, fit)
        for k, (gtype, size, pos, quat) in enumerate(pieces):
            piece = g if k == 0 else g.parent.add_geom(name=f"{name}_{k}")
            if k:
                copies[piece.name] = name
                for attr in _COPIED:
                    setattr(piece, attr, getattr(g, attr))
            piece.type, piece.size, piece.pos, piece.quat = gtype, size, pos, quat
    model = spec.compile()
    set_jaw_pads(model, True)
    for piece, source in copies.items():
        for field in ("geom_contype", "geom_conaffinity"):
            getattr(model, field)[model.geom(piece).id] = getattr(model, field)[model.geom(source).id]
    return model


def make_env(model: mujoco.MjModel, backend: str, **config: Any) -> PickPlace:
    """PickPlace (the parity harness's ``action_scale``, plus ``config``) on a variant model."""
    return PickPlace(PickPlaceConfig(**{**CONFIG, **config}), backend, model=model)


def grasp_states(env: PickPlace, n_states: int, steps: int = EPISODE_STEPS) -> tuple[PhysicsState, np.ndarray]:
    """Up to ``n_states`` "arm in contact" states (:func:`parity.contact_classes`) whose own ``mj_forward``
    already has an arm contact, evenly spaced along the scripted episode of ``env`` (seed 0).

    Returns physics states (N + 1, ...) — the last repeats the N-th, as
    :func:`parity.one_step_deviation` drops a trajectory's final state — and the ctrl (N, nu)
    applied from each.
    """
    traj = run_episodes(env, "scripted", jax.random.PRNGKey(0), 1, steps, trajectory=True)
    states = cast(State, traj["states"])  # with trajectory, every State after its step
    phys = jax.tree.map(lambda x: np.asarray(x[0]), states.physics)  # (T, ...) after each step
    ctrls = phys.ctrl[1:]  # held from phys[t] to phys[t + 1]
    idx = np.flatnonzero(parity.contact_classes(env.mj_model, phys, ctrls, env.n_substeps) == ARM_IN_CONTACT)
    floor_block = sorted(env.mj_model.geom(g).id for g in ("floor", "block"))
    touching = [any(sorted(g) != floor_block for g in c["geom"]) for c in c_contacts(env.mj_model, phys.qpos[idx])]
    idx = idx[np.asarray(touching, bool)]  # the arm touches something already at the state itself
    if idx.size == 0:
        raise RuntimeError(f"no state with the arm in contact in {steps} scripted steps")
    idx = idx[np.unique(np.linspace(0, idx.size - 1, min(n_states, idx.size)).round().astype(int))]
    return jax.tree.map(lambda x: x[np.append(idx, idx[-1])], phys), ctrls[idx]


def c_contacts(model: mujoco.MjModel, qpos: np.ndarray | Array) -> list[dict[str, np.ndarray]]:
    """Active contacts (dist < includemargin) after ``mj_forward`` at each ``qpos`` (N, nq): per state
    ``geom`` (k, 2), ``dist`` (k,) m, ``pos`` (k, 3) m, ``normal`` (k, 3) (from geom[0] to geom[1])."""
    data, out = mujoco.MjData(model), []
    for q in np.asarray(qpos, np.float64):
        data.qpos[:] = q
        mujoco.mj_forward(model, data)
        c = data.contact
        n = data.ncon
        out.append(_active(c.geom[:n], c.dist[:n], c.includemargin[:n], c.pos[:n], c.frame[:n, :3]))
    return out


def mjx_contacts(model: mujoco.MjModel, qpos: np.ndarray | Array) -> list[dict[str, np.ndarray]]:
    """As :func:`c_contacts`, after ``mjx.forward`` (one jitted, vmapped call over the N states)."""
    mx = mjx.put_model(model)
    d0 = mjx.make_data(mx)
    contact = jax.jit(jax.vmap(lambda q: mjx.forward(mx, d0.replace(qpos=q))._impl.contact))(jnp.asarray(qpos))
    c = jax.tree.map(np.asarray, contact)
    return [_active(c.geom[i], c.dist[i], c.includemargin[i], c.pos[i], c.frame[i, :, 0]) for i in range(len(qpos))]


def _active(geom, dist, margin, pos, normal) -> dict[str, np.ndarray]:
    keep = dist < margin
    return {"geom": geom[keep].astype(int), "dist": dist[keep], "pos": pos[keep], "normal": normal[keep]}


def pair_label(model: mujoco.MjModel, g1: int, g2: int) -> str:
    """Primitive pair of two geoms, lower type first as MJX's collider table: ``"capsule–box"``."""
    types = sorted(int(model.geom_type[g]) for g in (g1, g2))
    return "–".join(mujoco.mjtGeom(t).name.removeprefix("mjGEOM_").lower() for t in types)


def compare_contacts(model: mujoco.MjModel, c: list[dict], m: list[dict]) -> dict[str, dict[str, Any]]:
    """Per primitive pair (:func:`pair_label`): ``geoms`` (names in contact), ``c`` / ``mjx`` contact
    counts, ``duplicates`` (MJX points repeating one of the same geom pair), ``unmatched`` (C
    contacts whose geom pair MJX lacks), and over the matched C contacts (nearest MJX point of the
    same geom pair) max ``dist`` |Δdist| m, ``pos`` |Δpos| m, ``angle`` between normals (rad)."""
    out: dict[str, dict[str, Any]] = {}

    def row(g1: int, g2: int) -> dict[str, Any]:
        r = out.setdefault(pair_label(model, g1, g2),
                           {"geoms": set(), "c": 0, "mjx": 0, "duplicates": 0, "unmatched": 0,
                                                       "dist": 0.0, "pos": 0.0, "angle": 0.0})
        r["geoms"].add(" / ".join(sorted(model.geom(g).name for g in (g1, g2))))
        return r

    for cs, ms in zip(c, m, strict=True):
        mkeys = [tuple(sorted(g)) for g in ms["geom"]]
        for j, key in enumerate(mkeys):
            r = row(*key)
            r["mjx"] += 1
            r["duplicates"] += any(mkeys[i] == key and np.array_equal(ms["pos"][i], ms["pos"][j]) for i in range(j))
        for g, dist, pos, normal in zip(cs["geom"], cs["dist"], cs["pos"], cs["normal"]):
            r = row(*g)
            r["c"] += 1
            cand = [j for j, key in enumerate(mkeys) if key == tuple(sorted(g))]
            if not cand:
                r["unmatched"] += 1
                continue
            j = cand[int(np.argmin([np.linalg.norm(ms["pos"][j] - pos) for j in cand]))]
            n = ms["normal"][j] * (1.0 if ms["geom"][j][0] == g[0] else -1.0)  # MJX may order the pair the other way
            r["dist"] = max(r["dist"], float(abs(ms["dist"][j] - dist)))
            r["pos"] = max(r["pos"], float(np.linalg.norm(ms["pos"][j] - pos)))
            r["angle"] = max(r["angle"], float(np.arctan2(np.linalg.norm(np.cross(normal, n)), normal @ n)))
    return {k: {**v, "geoms": sorted(v["geoms"])} for k, v in sorted(out.items())}


def scripted_success(model: mujoco.MjModel, backend: str, seeds: int) -> float:
    """Scripted PickPlace success rate over ``seeds`` random block positions (key 0)."""
    env = make_env(model, backend, random_block_position=True)
    return float(np.mean(run_episodes(env, "scripted", jax.random.PRNGKey(0), seeds, EPISODE_STEPS,
                                      stop_when_done=True)["success"]))


def study_variant(variant: str, n_states: int, seeds: int, mjx_seeds: int) -> dict[str, Any]:
    """All measurements of one variant (see the module docstring); 0 seeds skip a success rate."""
    model = variant_model(variant)
    env = make_env(model, "c")
    phys, ctrls = grasp_states(env, n_states)
    qpos = phys.qpos[:-1]
    out: dict[str, Any] = {"states": len(qpos),
                           "contacts": compare_contacts(model, c_contacts(model, qpos), mjx_contacts(model, qpos))}
    one = parity.one_step_deviation(env, phys, ctrls, tolerance=0.0)
    out["one_step"] = one[parity.CONTACT_CLASSES[ARM_IN_CONTACT]]
    out["success_c"] = scripted_success(model, "c", seeds) if seeds else None
    out["success_mjx"] = scripted_success(model, "mjx", mjx_seeds) if mjx_seeds else None
    return out


def format_markdown(results: dict[str, dict[str, Any]], seeds: int, mjx_seeds: int) -> str:
    """Two markdown tables: contacts per primitive pair, and one-step deviation and success per variant."""
    lines = [
        "| variant | primitive pair | geom pairs in contact | contacts C / MJX | MJX duplicates | C unmatched | max "
        "Δdist (m) | max Δpos (m) | max normal angle (rad) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for variant, r in results.items():
        for pair, p in r["contacts"].items():
            geoms = "; ".join(g.replace("_collision", "") for g in p["geoms"])
            lines.append(f"| {variant} | {pair} | {geoms} | {p['c']} / {p['mjx']} | {p['duplicates']} | "
                         f"{p['unmatched']} | {p['dist']:.1e} | {p['pos']:.1e} | {p['angle']:.1e} |")
    rate = lambda x, n: "—" if x is None else f"{x:.3f} ({round(x * n)}/{n})"  # noqa: E731
    lines += [
        "",
        f"| variant | grasp states | one step, same iterations: max Δqpos / Δqvel | scripted success `c` ({seeds} "
        f"seeds) | `mjx` float64 ({mjx_seeds} seeds) |",
        "|---|---|---|---|---|",
    ]
    for variant, r in results.items():
        o = r["one_step"]
        lines.append(f"| {variant} | {o['states']} | {o['qpos']:.1e} / {o['qvel']:.1e} | {rate(r['success_c'], seeds)} "
                     f"| {rate(r['success_mjx'], mjx_seeds)} |")
    return "\n".join(lines)


def _count(low: int) -> Callable[[str], int]:
    """An argparse ``type=``: an integer >= ``low``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = low - 1
        if value < low:
            raise argparse.ArgumentTypeError(f"expected an integer >= {low}, got {text!r}")
        return value

    parse.__name__ = f"integer >= {low}"
    return parse


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m so101_mjx.validation.collision_study",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--states", type=_count(1), default=32, help="grasp states per variant")
    parser.add_argument("--seeds", type=_count(0), default=64, help="scripted PickPlace seeds on c (0 skips)")
    parser.add_argument("--mjx-seeds", type=_count(0), default=0, help="scripted PickPlace seeds on mjx (0 skips)")
    parser.add_argument("--variants", nargs="+", choices=list(VARIANTS), default=list(VARIANTS),
                        help="variants to measure")
    args = parser.parse_args(argv)
    jax.config.update("jax_enable_x64", True)
    results = {}
    for variant in args.variants:
        t0 = time.perf_counter()
        results[variant] = study_variant(variant, args.states, args.seeds, args.mjx_seeds)
        print(f"[collision_study] {variant}: {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
    print(format_markdown(results, args.seeds, args.mjx_seeds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
