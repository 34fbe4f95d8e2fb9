"""``so101-mjx distill``: a pixel policy (the student) distilled from a state policy (the teacher) with DAgger.

The student sees what a real SO-101 sees, the front camera's ``pixels/front`` (H, W, 3) uint8 and
``agent_pos`` (14,); the teacher sees the privileged flat observation (``obs["state"]``). Both act
in the env's action space ([dx, dy, dz] in [-1, 1], grasp in [0, 1]). DAgger (Ross et al., 2011,
with β = 1 on the first iteration and 0 after): iteration 0 lets the teacher drive; every later
iteration lets the current student drive, labels every visited frame with the teacher's action,
adds the frames to the dataset and refits the student on all of it (mean squared error). The
student-driven episodes of iteration k measure the student fitted after iteration k − 1 (success
rate from the task's normal reset), so the learning curve costs no extra rollouts.

Runs on backend ``c`` (the camera is MuJoCo C, :mod:`so101_mjx.render.batch`). Writes ``student.npz``
(the flax params, flattened by path), ``distill.json`` (config and per-iteration figures) and,
with onnx installed, ``student.onnx``; the student network and its ONNX graph are in
:mod:`so101_mjx.training.pixel_policy`.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import traverse_util
from jax import Array

from so101_mjx import _checks as checks
from so101_mjx._files import atomic_path, atomic_write
from so101_mjx._lock import exclusive
from so101_mjx.envs import SO101Env
from so101_mjx.envs.arm import AGENT_POS_SIZE
from so101_mjx.errors import InputError
from so101_mjx.training.pixel_policy import MIN_IMAGE_SIZE, PixelStudent, conv_sides

PIXELS = "pixels/front"


@dataclasses.dataclass(frozen=True)
class DistillConfig:
    """DAgger sizes: ``iterations`` rounds of ``episodes`` worlds for ``steps`` control steps each,
    then ``updates`` Adam steps on minibatches of ``batch_size`` frames drawn from the aggregated dataset."""

    iterations: int = 8
    episodes: int = 64
    steps: int = 40
    updates: int = 300
    batch_size: int = 128
    learning_rate: float = 3e-4
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("iterations", "episodes", "steps", "updates", "batch_size"):
            checks.integer(name, getattr(self, name), ge=1)
        checks.real("learning_rate", self.learning_rate, gt=0)
        checks.integer("seed", self.seed, ge=0)


def check_sizes(config: DistillConfig, size: int, student: PixelStudent) -> None:
    """InputError naming the options unless ``size`` x ``size`` frames suit the student and the run's arrays fit
    the machine's memory. A frame is its pixels, agent_pos and label; the aggregated dataset (RAM) holds up to
    every step's frame, twice while it is concatenated; the device one iteration's frames and a minibatch's
    float32 activations three times (forward, backward, gradients)."""
    if size < MIN_IMAGE_SIZE:
        raise InputError(f"image_size must be >= {MIN_IMAGE_SIZE} px (the student's convolutions leave nothing of a smaller frame), got {size}")
    frame = 3 * size**2 + 4 * (AGENT_POS_SIZE + 4)
    frames = config.iterations * config.episodes * config.steps
    checks.fits_memory(f"--iterations {config.iterations} x --episodes {config.episodes} x --steps {config.steps}",
                       2 * frames * frame, f"up to {frames:,} frames of {frame:,} B in the aggregated dataset, twice")
    checks.fits_memory(f"--episodes {config.episodes} x --steps {config.steps}", 2 * config.episodes * config.steps * frame,
                       "one iteration's frames", device=True)
    activations = 4 * (3 * size**2 + sum(c * side**2 for c, side in zip(student.channels, conv_sides(size))))
    checks.fits_memory(f"--batch-size {config.batch_size}", 3 * config.batch_size * activations,
                       f"{activations:,} B of activations per frame, three times", device=True)


def collector(env: SO101Env, teacher: Callable[[Array], Array], student: PixelStudent, steps: int):
    """Jitted ``collect(params, keys (B, 2), teacher_drives) -> per-step arrays (B, T, ...)``: the
    frames and agent_pos before each step, the teacher's label, and done / success after it."""

    def one(params, key, teacher_drives):
        def body(state, _):
            label = teacher(state.obs["state"])
            own = student.apply(params, state.obs[PIXELS], state.obs["agent_pos"])
            after = env.step(state, jnp.where(teacher_drives, label, own.astype(label.dtype)))
            out = {PIXELS: state.obs[PIXELS], "agent_pos": state.obs["agent_pos"], "label": label,
                   "done": after.done > 0, "success": after.info.succeed}
            return after, out

        return jax.lax.scan(body, env.reset(key), None, length=steps)[1]

    return jax.jit(jax.vmap(one, in_axes=(None, 0, None)))


def visited(out: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """``(mask (B, T) of the steps up to and including each episode's first done, success (B,))``."""
    done = out["done"]
    before = np.cumsum(done, axis=1) - done  # dones strictly before t
    first = np.where(done.any(1), done.argmax(1), done.shape[1] - 1)
    return before == 0, out["success"][np.arange(len(done)), first] & done.any(1)


def fit(student: PixelStudent, params, data: dict[str, np.ndarray], config: DistillConfig, key: Array):
    """``updates`` Adam steps on the mean squared error to the labels, minibatches drawn uniformly
    with replacement; (params, mean loss of the last tenth of the updates)."""
    optimizer = optax.adam(config.learning_rate)
    opt_state = optimizer.init(params)

    @jax.jit
    def update(params, opt_state, pixels, agent_pos, label):
        def loss_fn(p):
            return jnp.mean(jnp.sum((student.apply(p, pixels, agent_pos) - label) ** 2, axis=-1))

        loss, grads = jax.value_and_grad(loss_fn)(params)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    n = len(data["label"])
    losses = []
    for k in range(config.updates):
        idx = np.asarray(jax.random.randint(jax.random.fold_in(key, k), (min(config.batch_size, n),), 0, n))
        params, opt_state, loss = update(params, opt_state, data[PIXELS][idx], data["agent_pos"][idx], data["label"][idx])
        losses.append(loss)
    return params, float(np.mean(jax.device_get(losses[-max(config.updates // 10, 1):])))


def distill(env: SO101Env, teacher: Callable[[Array], Array], config: DistillConfig = DistillConfig(),
            student: PixelStudent | None = None, log: Callable[[dict[str, Any]], None] = lambda row: None):
    """DAgger; returns ``(student, params, rows)``, one row per iteration: ``driver``, ``success``
    (of the driven episodes), ``frames`` added, ``dataset`` size, ``loss``, ``seconds``; then a last
    row (``driver`` "final student") for the final student on ``episodes`` fresh episodes, nothing added."""
    if env.cameras is None or PIXELS not in env.observation_size:
        raise InputError("distill needs an env made with image_obs=True (backend c) and the front camera")
    student = student or PixelStudent()
    key = jax.random.PRNGKey(config.seed)
    size = env.config.image_size
    check_sizes(config, size, student)
    params = student.init(jax.random.fold_in(key, 1), jnp.zeros((1, size, size, 3), jnp.uint8), jnp.zeros((1, AGENT_POS_SIZE)))
    collect = collector(env, teacher, student, config.steps)
    data: dict[str, list[np.ndarray]] = {PIXELS: [], "agent_pos": [], "label": []}
    rows = []
    for it in range(config.iterations):
        start = time.perf_counter()
        keys = jax.random.split(jax.random.fold_in(key, 1000 + it), config.episodes)
        out = jax.device_get(collect(params, keys, it == 0))
        mask, success = visited(out)
        for name in data:
            data[name].append(np.asarray(out[name])[mask])
        dataset = {name: np.concatenate(parts) for name, parts in data.items()}
        params, loss = fit(student, params, dataset, config, jax.random.fold_in(key, 2000 + it))
        row = {"iteration": it, "driver": "teacher" if it == 0 else "student", "success": float(success.mean()),
               "frames": int(mask.sum()), "dataset": len(dataset["label"]), "loss": loss, "seconds": time.perf_counter() - start}
        rows.append(row)
        log(row)
    start = time.perf_counter()
    _, success = visited(jax.device_get(collect(params, jax.random.split(jax.random.fold_in(key, 3000), config.episodes), False)))
    rows.append({"iteration": config.iterations, "driver": "final student", "success": float(success.mean()), "frames": 0,
                 "dataset": rows[-1]["dataset"], "loss": rows[-1]["loss"], "seconds": time.perf_counter() - start})
    log(rows[-1])
    return student, params, rows


def save(out: Path, params, meta: dict[str, Any]) -> Path:
    """``out/student.npz`` (params flattened by '/'-joined path) and ``out/distill.json``."""
    flat = {"/".join(k): np.asarray(v) for k, v in traverse_util.flatten_dict(params).items()}
    with atomic_path(out / "student.npz") as tmp, open(tmp, "wb") as file:
        np.savez(file, **flat)
    atomic_write(out / "distill.json", json.dumps(meta, indent=1, default=str))
    return out / "student.npz"


def run(args: argparse.Namespace) -> int:
    from so101_mjx.training import policies

    teacher = policies.load(args.teacher).require_state("distill's teacher")
    config = DistillConfig(**{f.name: getattr(args, f.name) for f in dataclasses.fields(DistillConfig)
                              if getattr(args, f.name) is not None})
    cameras = {"image_obs": True, "image_size": args.image_size, "image_quality": args.image_quality,
               "visual_randomization": args.visual_randomization and dataclasses.asdict(args.visual_randomization),
               **({"camera_specs": {c: dataclasses.asdict(spec) for c, spec in args.camera_spec}} if args.camera_spec else {})}
    env = teacher.make_env("c", **cameras)
    with exclusive(args.out, "distillation"):  # one writer per --out, from the start (a second run is refused at once)
        print(f"distill {args.teacher} ({teacher.env}) into a pixel student: {config}", flush=True)
        log = lambda r: print(f"  iteration {r['iteration']}: {r['driver']} drove, success {r['success']:.3f}, +{r['frames']} frames "  # noqa: E731
                              f"(dataset {r['dataset']}), loss {r['loss']:.4f}, {r['seconds']:.0f} s", flush=True)
        _, params, rows = distill(env, teacher.jax_fn, config, log=log)
        path = save(Path(args.out), params, {"teacher": str(args.teacher), "env": teacher.env,
                                             "env_config": {**teacher.env_config, **cameras},
                                             "config": dataclasses.asdict(config), "iterations": rows})
        print(f"student: {path}")
        try:
            import onnx  # noqa: F401
        except ImportError:
            print("onnx is not installed (pip install so101-mjx[export]): no student.onnx")
        else:
            from so101_mjx.training import pixel_policy

            pixel_policy.export(args.out)
    return 0
