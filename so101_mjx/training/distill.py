"""``so101-mjx distill``: a pixel policy (the student) distilled from a state policy (the teacher) with DAgger.

The student sees what a real SO-101 sees: the frames of the env's image cameras (``pixels/<camera>``
(H, W, 3) uint8, ``image_cameras``) and ``agent_pos`` (in joint mode the six motor positions in the
follower's units, quantized as the servo model's encoders report them); the teacher sees the privileged
flat observation (``obs["state"]``). Both act in the env's action space (Cartesian [dx, dy, dz, grasp],
or joint-mode targets). DAgger (Ross et al., 2011, with β = 1 on the first iteration and 0 after):
iteration 0 lets the teacher drive; every later iteration lets the current student drive, labels every
visited frame with the teacher's action, adds the frames to the dataset and refits the student on all
of it (mean squared error, each minibatch's frames shifted by up to ``shift`` px as in DrQ and, with
``colour_jitter``, their colours jittered; with
``state_loss`` > 0 plus that weight times an auxiliary error: a linear head on the student's hidden layer
predicts the privileged part of the teacher's observation, the block's position, standardized). With
``student="estimator"`` the student's head estimates that privileged part instead, fitted to its true value,
and the frozen teacher acts on it (:mod:`so101_mjx.training.estimator`). The student-driven episodes of
iteration k measure the student fitted after iteration k − 1 (success rate from the task's normal reset), so
the learning curve costs no extra rollouts.

Runs on backend ``c`` (the cameras are MuJoCo C, :mod:`so101_mjx.render.batch`). Writes ``student.npz``
(the flax params, flattened by path), ``distill.json`` (config and per-iteration figures) and,
with onnx installed, ``student.onnx``; the student network and its ONNX graph are in
:mod:`so101_mjx.training.pixel_policy`.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import linen as nn, traverse_util
from jax import Array

from so101_mjx import _checks as checks, _progress
from so101_mjx._files import atomic_path, atomic_write
from so101_mjx._lock import exclusive
from so101_mjx.envs import SO101Env
from so101_mjx.errors import InputError
from so101_mjx.sim import servo
from so101_mjx.training import estimator
from so101_mjx.training.estimator import Estimator
from so101_mjx.training.pixel_policy import MIN_IMAGE_SIZE, Bounds, PixelStudent, Spec, conv_sides
from so101_mjx.training.policy import NumpyPolicy

if TYPE_CHECKING:
    from so101_mjx.render.camera import CameraSpec
    from so101_mjx.render.visual_randomization import VisualRandomization


STUDENTS = ("direct", "estimator")


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
    shift: int = 0  # px: each fitted frame shifted by up to this many pixels per axis (edges repeated)
    colour_jitter: float = 0.0  # each fitted frame's channels scaled by up to ± this, its brightness moved (jittered)
    # weight of the auxiliary loss: the privileged observation (obs["state"] after agent_pos) predicted from the
    # student's hidden layer, each entry standardized over the dataset; the head is for training only (not saved)
    state_loss: float = 0.0
    # "direct": the student's head is the action, fitted to the teacher's; "estimator": its head estimates the
    # privileged state, fitted to the true state, and the frozen teacher acts on it (training.estimator)
    student: str = "direct"
    # an estimator student's estimate: "world" positions, or positions relative to the gripper point, which the
    # student computes from the motor positions (joint mode; training.estimator)
    estimate_origin: str = "world"

    def __post_init__(self) -> None:
        for name in ("iterations", "episodes", "steps", "updates", "batch_size"):
            checks.integer(name, getattr(self, name), ge=1)
        checks.integer("shift", self.shift, ge=0, le=16)
        checks.real("colour_jitter", self.colour_jitter, ge=0, le=1)
        checks.real("learning_rate", self.learning_rate, gt=0)
        checks.real("state_loss", self.state_loss, ge=0)
        checks.integer("seed", self.seed, ge=0)
        if self.student not in STUDENTS:
            raise InputError(f"student must be one of {STUDENTS}, got {self.student!r}")
        if self.student == "estimator" and self.state_loss:
            raise InputError("state_loss applies to student='direct' only (an estimator student's whole loss is "
                             "the state's)")
        if self.estimate_origin not in estimator.ORIGINS:
            raise InputError(f"estimate_origin must be one of {estimator.ORIGINS}, got {self.estimate_origin!r}")
        if self.estimate_origin != "world" and self.student != "estimator":
            raise InputError("estimate_origin applies to student='estimator' only")


def spec_of(env: SO101Env) -> Spec:
    """The student :class:`Spec` of an image env: its cameras and frame size, agent_pos, and in joint mode its action
    bounds."""
    config = env.config
    bounds: Bounds | None = None
    if config.control_mode == "joint":
        low, high = env.arm.action_bounds()
        bounds = (tuple(map(float, low)), tuple(map(float, high)))
    return Spec(config.image_size, tuple(config.image_cameras), env.agent_pos_size, bounds)


def origin_arrays(env: SO101Env) -> dict[str, np.ndarray]:
    """The gripper point's chain of a joint-mode env (:func:`so101_mjx.training.estimator.origin_arrays`), its motor
    map in the env's units and calibration; InputError in Cartesian mode (agent_pos is not the motor positions)."""
    from so101_mjx.robot import motors

    joint = env.arm.joint_mode
    if joint is None:
        raise InputError("estimate_origin 'gripper' needs a joint-mode teacher (agent_pos the six motor positions)")
    gain, offset = motors.gain_offset(env.arm.motor_ranges, joint.units, joint.calibration)
    return estimator.origin_arrays(env.arm.kin, gain, offset)


def check_sizes(config: DistillConfig, spec: Spec, student: PixelStudent) -> None:
    """InputError naming the config fields unless the frames suit the student and the run's arrays fit the machine's
    memory. A frame is its pixels (every camera's), agent_pos and label; the aggregated dataset (RAM) holds up
    to every step's frame, twice while it is concatenated; the device one iteration's frames and a minibatch's
    float32 activations three times (forward, backward, gradients)."""
    size = spec.size
    if size < MIN_IMAGE_SIZE:
        raise InputError(f"image_size must be >= {MIN_IMAGE_SIZE} px (the student's convolutions leave nothing of a "
                         f"smaller frame), got {size}")
    frame = len(spec.cameras) * 3 * size**2 + 4 * (spec.agent_pos + spec.actions)
    frames = config.iterations * config.episodes * config.steps
    checks.fits_memory(f"iterations {config.iterations} x episodes {config.episodes} x steps {config.steps}",
                       2 * frames * frame, f"up to {frames:,} frames of {frame:,} B in the aggregated dataset, twice",
                       parameters=("iterations", "episodes", "steps"))
    checks.fits_memory(f"episodes {config.episodes} x steps {config.steps}", 2 * config.episodes * config.steps * frame,
                       "one iteration's frames", device=True, parameters=("episodes", "steps"))
    activations = 4 * len(spec.cameras) * (3 * (size + 2 * config.shift) ** 2
                                           + sum(c * side**2 for c, side in zip(student.channels, conv_sides(size))))
    checks.fits_memory(f"batch_size {config.batch_size}", 3 * config.batch_size * activations,
                       f"{activations:,} B of activations per frame, three times", device=True,
                       parameters=("batch_size",))


class StateProbe(nn.Module):
    """The student with a linear head on its hidden layer predicting ``state_size`` privileged entries (training
    only): ``(action (..., A), predicted state (..., state_size))``; the student's params are under ``student``."""

    student: PixelStudent
    state_size: int

    @nn.compact
    def __call__(self, pixels: Sequence[Array], agent_pos: Array) -> tuple[Array, Array]:
        action, hidden = self.student(pixels, agent_pos, output="hidden")
        return action, nn.Dense(self.state_size, name="state_head")(hidden)


def collector(env: SO101Env, teacher: Callable[[Array], Array], student: PixelStudent, steps: int):
    """Jitted ``collect(variables, keys (B, 2), teacher_drives) -> per-step arrays (B, T, ...)``: each
    camera's frames (``pixels/<camera>``), agent_pos and the privileged rest of the teacher's observation
    (``state``) before each step, the teacher's label, and done / success after it; an estimator student's
    estimate of ``state`` too (``estimate``)."""
    spec = spec_of(env)

    def one(variables, key, teacher_drives):
        def body(state, _):
            label = teacher(state.obs["state"])
            own, raw = student.apply(variables, spec.frames(state.obs), state.obs["agent_pos"], output="estimate")
            after = env.step(state, jnp.where(teacher_drives, label, own.astype(label.dtype)))
            out = {**{f"pixels/{c}": f for c, f in zip(spec.cameras, spec.frames(state.obs))},
                   "agent_pos": state.obs["agent_pos"], "state": state.obs["state"][spec.agent_pos:],
                   "label": label, "done": after.done > 0, "success": after.info.succeed}
            if student.estimator is not None:
                out["estimate"] = estimator.estimated_state(variables[estimator.COLLECTION], student.estimator,
                                                            state.obs["agent_pos"], raw, jnp)
            return after, out

        return jax.lax.scan(body, env.reset(key), None, length=steps)[1]

    return jax.jit(jax.vmap(one, in_axes=(None, 0, None)))


def visited(out: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """``(mask (B, T) of the steps up to and including each episode's first done, success (B,))``."""
    done = out["done"]
    before = np.cumsum(done, axis=1) - done  # dones strictly before t
    first = np.where(done.any(1), done.argmax(1), done.shape[1] - 1)
    return before == 0, out["success"][np.arange(len(done)), first] & done.any(1)


def shifted(pixels: Array, shift: int, key: Array) -> Array:
    """``pixels`` (B, H, W, 3), each frame moved by up to ``shift`` px per axis (a random crop of the frame
    padded by repeating its edges; Kostrikov et al., 2020, DrQ)."""
    if shift == 0:
        return pixels
    b, h, w, _ = pixels.shape
    padded = jnp.pad(pixels, ((0, 0), (shift, shift), (shift, shift), (0, 0)), mode="edge")
    offsets = jax.random.randint(key, (b, 2), 0, 2 * shift + 1)
    return jax.vmap(lambda frame, o: jax.lax.dynamic_slice(frame, (o[0], o[1], 0), (h, w, 3)))(padded, offsets)


def jittered(pixels: Array, jitter: float, key: Array) -> Array:
    """``pixels`` (B, H, W, 3) uint8, each frame's colour channels scaled by factors uniform in [1 - jitter,
    1 + jitter] and its brightness moved by up to ``jitter`` half the full scale, rounded back to uint8 (colour
    jitter, as in DrQ-v2's and RAD's image augmentations)."""
    if jitter == 0:
        return pixels
    gain_key, offset_key = jax.random.split(key)
    gain = 1 + jax.random.uniform(gain_key, (len(pixels), 1, 1, 3), minval=-jitter, maxval=jitter)
    offset = 127.5 * jax.random.uniform(offset_key, (len(pixels), 1, 1, 1), minval=-jitter, maxval=jitter)
    return jnp.round(jnp.clip(pixels * gain + offset, 0, 255)).astype(jnp.uint8)


def fit(model: StateProbe | PixelStudent, variables, data: dict[str, np.ndarray], spec: Spec, config: DistillConfig,
        key: Array):
    """``updates`` Adam steps on the ``params`` of ``variables``, minibatches drawn uniformly with replacement,
    their frames shifted by up to ``config.shift`` px (:func:`shifted`) and their colours jittered by
    ``config.colour_jitter`` (:func:`jittered`). The loss: for a :class:`StateProbe` the
    mean squared error to the labels (summed over the action) plus ``config.state_loss`` times the probe's mean
    squared error to the privileged state standardized over ``data``; for an estimator student the mean squared
    error of its head to the privileged state standardized by its teacher arrays. Returns (variables, mean loss
    of the last tenth of the updates: the action's, or the estimator's)."""
    optimizer = optax.adam(config.learning_rate)
    opt_state = optimizer.init(variables["params"])
    if isinstance(model, PixelStudent):  # an estimator student
        teacher, est = variables[estimator.COLLECTION], cast(Estimator, model.estimator)
        mean, std, weights = teacher["estimate_mean"], teacher["estimate_std"], (0.0, 1.0)
        origin = lambda agent_pos: estimator.origin_of(teacher, est, agent_pos, jnp)  # noqa: E731
    else:
        mean, std, weights = data["state"].mean(0), data["state"].std(0) + 1e-6, (1.0, config.state_loss)
        origin = lambda agent_pos: 0.0  # noqa: E731

    @jax.jit
    def update(params, opt_state, pixels, agent_pos, label, state, key):
        pixels = tuple(shifted(p, config.shift, k) for p, k in zip(pixels, jax.random.split(key, len(pixels))))
        pixels = tuple(jittered(p, config.colour_jitter, k)
                       for p, k in zip(pixels, jax.random.split(jax.random.fold_in(key, 1), len(pixels))))

        def loss_fn(p):
            inputs = ({**variables, "params": p}, pixels, agent_pos)
            action, predicted = model.apply(*inputs, output="estimate") if weights[0] == 0 else model.apply(*inputs)
            action_loss = jnp.mean(jnp.sum((action - label) ** 2, axis=-1))
            state_loss = jnp.mean((predicted - (state - origin(agent_pos) - mean) / std) ** 2)
            return weights[0] * action_loss + weights[1] * state_loss, action_loss if weights[0] else state_loss

        (_, loss), grads = jax.value_and_grad(loss_fn, has_aux=True)(params)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    n = len(data["label"])
    losses = []
    params = variables["params"]
    for k in _progress.each(range(config.updates), config.updates, "fit", "update"):
        draw, move = jax.random.split(jax.random.fold_in(key, k))
        idx = np.asarray(jax.random.randint(draw, (min(config.batch_size, n),), 0, n))
        params, opt_state, loss = update(params, opt_state, tuple(f[idx] for f in spec.frames(data)),
                                         data["agent_pos"][idx], data["label"][idx], data["state"][idx], move)
        losses.append(loss)
    return {**variables, "params": params}, float(np.mean(jax.device_get(losses[-max(config.updates // 10, 1):])))


def distill(env: SO101Env, teacher: Callable[[Array], Array], config: DistillConfig = DistillConfig(),
            student: PixelStudent | None = None, log: Callable[[dict[str, Any]], None] = lambda row: None,
            teacher_policy: NumpyPolicy | None = None):
    """DAgger; returns ``(student, variables, rows)``, one row per iteration: ``driver``, ``success``
    (of the driven episodes), ``frames`` added, ``dataset`` size, ``loss``, ``seconds`` (an estimator student:
    ``estimate_error``, the median distance in m of its estimate from the privileged state over the frames);
    then a last row (``driver`` "final student") for the final student on ``episodes`` fresh episodes, nothing
    added. An estimator student (``config.student``) needs the teacher's numpy policy ``teacher_policy``."""
    if env.cameras is None:
        raise InputError("distill needs an env made with image_obs=True (backend c)")
    spec = spec_of(env)
    key = jax.random.PRNGKey(config.seed)
    blank = (tuple(jnp.zeros((1, spec.size, spec.size, 3), jnp.uint8) for _ in spec.cameras),
             jnp.zeros((1, spec.agent_pos)))
    if config.student == "estimator":
        if teacher_policy is None:
            raise InputError("an estimator student needs its teacher's numpy policy (teacher_policy)")
        origin = None if config.estimate_origin == "world" else origin_arrays(env)
        est = Estimator.of_teacher(teacher_policy.weights, spec.agent_pos, config.estimate_origin,
                                   0 if origin is None else len(origin["origin_qpos0"]))
        if est.actions != spec.actions:
            raise InputError(f"the teacher gives {est.actions} actions, the env takes {spec.actions}")
        student = student or PixelStudent(bounds=spec.bounds, estimator=est)
        size = est.state_size
        model: StateProbe | PixelStudent = student
        variables = {**student.init(jax.random.fold_in(key, 1), *blank), estimator.COLLECTION: estimator.teacher_arrays(
            teacher_policy.weights, teacher_policy.scale, teacher_policy.offset, np.zeros(size), np.ones(size), origin)}
        own = lambda v: v  # noqa: E731
    else:
        student = student or PixelStudent(bounds=spec.bounds)
        model = StateProbe(student, env.obs_size() - spec.agent_pos)
        variables = dict(model.init(jax.random.fold_in(key, 1), *blank))
        own = lambda v: {"params": v["params"]["student"]}  # noqa: E731  # the student's params within the probe's
    if (student.bounds != spec.bounds or (student.estimator is None) != (config.student == "direct")
            or student.estimator is not None and student.estimator.origin != config.estimate_origin):
        raise InputError(f"the student (action bounds {student.bounds}, estimator {student.estimator}) does not "
                         f"suit the env's bounds {spec.bounds}, student={config.student!r} and "
                         f"estimate_origin={config.estimate_origin!r}")
    check_sizes(config, spec, student)
    collect = collector(env, teacher, student, config.steps)
    entries = [*(f"pixels/{c}" for c in spec.cameras), "agent_pos", "state", "label"]
    dataset: dict[str, np.ndarray] = {}  # the aggregated frames
    rows = []
    for it in range(config.iterations):
        start = time.perf_counter()
        keys = jax.random.split(jax.random.fold_in(key, 1000 + it), config.episodes)
        _progress.phase(f"distill: iteration {it}: the {'teacher' if it == 0 else 'student'} drives "
                        f"{config.episodes} episodes of {config.steps} steps")
        out = jax.device_get(collect(own(variables), keys, it == 0))
        mask, success = visited(out)
        for name in entries:  # grown in place, one entry at a time: its old and grown arrays are the only copies
            part = np.asarray(out[name])[mask]
            dataset[name] = np.concatenate([dataset[name], part]) if name in dataset else part
        if student.estimator is not None and it == 0:  # the estimate's standardization, fixed from here on
            teacher_arrays = {name: np.asarray(v) for name, v in variables[estimator.COLLECTION].items()}
            target = dataset["state"] - estimator.origin_of(teacher_arrays, student.estimator, dataset["agent_pos"])
            variables = {**variables, estimator.COLLECTION: {
                **variables[estimator.COLLECTION], "estimate_mean": jnp.asarray(target.mean(0), jnp.float32),
                "estimate_std": jnp.asarray(target.std(0) + 1e-6, jnp.float32)}}
        variables, loss = fit(model, variables, dataset, spec, config, jax.random.fold_in(key, 2000 + it))
        row = {"iteration": it, "driver": "teacher" if it == 0 else "student", "success": float(success.mean()),
               "frames": int(mask.sum()), "dataset": len(dataset["label"]), "loss": loss,
               "seconds": time.perf_counter() - start, **estimate_error(out, mask)}
        rows.append(row)
        log(row)
    start = time.perf_counter()
    out = jax.device_get(collect(own(variables), jax.random.split(jax.random.fold_in(key, 3000), config.episodes),
                                 False))
    mask, success = visited(out)
    rows.append({"iteration": config.iterations, "driver": "final student",
                 "success": float(success.mean()), "frames": 0, "dataset": rows[-1]["dataset"],
                 "loss": rows[-1]["loss"], "seconds": time.perf_counter() - start, **estimate_error(out, mask)})
    log(rows[-1])
    return student, own(variables), rows


def estimate_error(out: dict[str, np.ndarray], mask: np.ndarray) -> dict[str, float]:
    """``{"estimate_error": median distance (m) of an estimator student's estimate from the privileged state over
    the ``mask``ed steps}``; empty for another student."""
    if "estimate" not in out:
        return {}
    return {"estimate_error": float(np.median(np.linalg.norm(out["estimate"] - out["state"], axis=-1)[mask]))}


def save(out: Path, params, meta: dict[str, Any]) -> Path:
    """``out/student.npz`` (params flattened by '/'-joined path) and ``out/distill.json``."""
    flat = {"/".join(k): np.asarray(v) for k, v in traverse_util.flatten_dict(params).items()}
    with atomic_path(out / "student.npz") as tmp, open(tmp, "wb") as file:
        np.savez(file, **flat)  # type: ignore[arg-type]  # numpy's stub: **arrays could name allow_pickle
    atomic_write(out / "distill.json", json.dumps(meta, indent=1, default=str))
    return out / "student.npz"


def train_student(teacher: str | Path, out: str | Path, config: DistillConfig = DistillConfig(), *,
                  image_size: int = 64, image_quality: str = "shadowed", cameras: Sequence[str] = ("front",),
                  visual_randomization: VisualRandomization | None = None,
                  camera_specs: dict[str, CameraSpec] | None = None,
                  servo_model: servo.ServoModel | dict | str | None = None) -> Path:
    """Distil the state policy at ``teacher`` (a checkpoint or an exported .onnx / .npz) into a pixel student seeing
    ``cameras``' ``image_size`` frames on backend ``c``, written to ``out`` (:func:`save`; ``student.onnx`` too when
    onnx is installed); ``servo_model``: a ServoModel or its fields, ``"off"`` for none, None for the teacher's. Returns
    ``student.npz``'s path."""
    from so101_mjx.training import policies

    policy = policies.load(teacher).require_state("distill's teacher")
    overrides = {"image_obs": True, "image_size": image_size, "image_quality": image_quality,
                 "image_cameras": list(cameras),
                 "visual_randomization": visual_randomization and dataclasses.asdict(visual_randomization),
                 **({"camera_specs": {c: dataclasses.asdict(spec) for c, spec in camera_specs.items()}}
                    if camera_specs else {})}
    if servo_model is not None:  # as a dict: the metadata is JSON
        # any other string than "off": parse refuses it; a ServoModel or a dict: parse returns one (never None)
        parsed = None if servo_model == "off" else servo.parse(cast("servo.ServoModel | dict", servo_model))
        overrides["servo_model"] = None if parsed is None else dataclasses.asdict(parsed)
    env = policy.make_env("c", **overrides)
    spec = spec_of(env)
    with exclusive(out, "distillation"):  # one writer per out, from the start (a second run is refused at once)
        print(f"distill {teacher} ({policy.env}) into a pixel student: {config}", flush=True)
        log = lambda r: print(  # noqa: E731
            f"  iteration {r['iteration']}: {r['driver']} drove, success {r['success']:.3f}, +{r['frames']} frames "
            f"(dataset {r['dataset']}), loss {r['loss']:.4f}"
            + (f", estimate error {1000 * r['estimate_error']:.1f} mm" if "estimate_error" in r else "")
            + f", {r['seconds']:.0f} s", flush=True)
        student, params, rows = distill(env, policy.jax_fn, config, log=log, teacher_policy=policy.weights)
        path = save(Path(out), params, {"teacher": str(teacher), "env": policy.env,
                                        "env_config": {**policy.env_config, **overrides},
                                        **({} if spec.bounds is None
                                           else {"action_bounds": [list(b) for b in spec.bounds]}),
                                        **({} if student.estimator is None
                                           else {"estimator": student.estimator.as_json()}),
                                        "config": dataclasses.asdict(config), "iterations": rows})
        print(f"student: {path}")
        try:
            import onnx  # noqa: F401
        except ImportError:
            print("onnx is not installed (pip install so101-mjx[export]): no student.onnx")
        else:
            from so101_mjx.training import pixel_policy

            pixel_policy.export(out)
    return path
