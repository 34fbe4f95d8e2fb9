"""``so101-mjx bench fk``: batched FK + Jacobian of ``gripperframe`` vs MuJoCo C per call."""

from __future__ import annotations

import contextlib
import functools

import jax
import jax.numpy as jnp
import mujoco
import numpy as np

from so101_mjx import _precision, _progress
from so101_mjx.benchmarks import check_batches, median_time, print_table
from so101_mjx.ik import iterative as ik
from so101_mjx.robot.kinematics import Kinematics
from so101_mjx.robot.scenes import ARM_JOINTS, joint_qpos_ids, load_model


def mujoco_rate(model: mujoco.MjModel, q: np.ndarray, repeats: int) -> float:
    """Evaluations/s of mj_kinematics + mj_comPos + mj_jacSite, one configuration per call."""
    data = mujoco.MjData(model)
    qadr, site = joint_qpos_ids(model), model.site("gripperframe").id
    jacp, jacr = np.zeros((3, model.nv)), np.zeros((3, model.nv))

    def loop():
        for qk in q:
            data.qpos[qadr] = qk
            mujoco.mj_kinematics(model, data)
            mujoco.mj_comPos(model, data)
            mujoco.mj_jacSite(model, data, jacp, jacr, site)

    return len(q) / median_time(loop, repeats)


def bench(batch: list[int], repeats: int, x64: bool = False) -> None:
    """Print evaluations/s of FK + Jacobian at each of the ``batch`` sizes against MuJoCo C (the median of ``repeats``
    timed runs), in float64 with ``x64``; ParameterError naming ``batch`` when the largest would not fit the device."""
    with _precision.x64(True) if x64 else contextlib.nullcontext():  # float64 asked for: restored after
        dtype = jnp.float64 if x64 else jnp.float32
        check_batches(batch, 1024, "configuration (pose and Jacobian in float64: XLA's buffers, about 1000 B)")
        model = load_model("pick_cube")
        kin = Kinematics.from_model(model, ARM_JOINTS)
        lo, hi = ik.joint_limits(model)
        rng = np.random.default_rng(0)
        _progress.phase("bench fk: MuJoCo C baseline")
        c_rate = mujoco_rate(model, rng.uniform(lo, hi, (2000, len(ARM_JOINTS))), repeats)

        fn = jax.jit(lambda q: kin.site_kinematics(q, "gripperframe"))  # pose + Jacobians, one forward pass
        rows = []
        for n in batch:
            _progress.phase(f"bench fk: batch {n}")
            q = jnp.asarray(rng.uniform(lo, hi, (n, len(ARM_JOINTS))), dtype)
            rate = n / median_time(functools.partial(fn, q), repeats)
            rows.append([n, rate, c_rate, rate / c_rate])
        print(f"FK (pose) + Jacobian of gripperframe, {jax.default_backend()}, {jnp.dtype(dtype).name}; "
              f"MuJoCo C = mj_kinematics+mj_comPos+mj_jacSite per call from Python")
        print_table(["batch", "evals/s", "mujoco_c/s", "ratio"], rows)
