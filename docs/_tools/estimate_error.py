"""Where an estimator student's block estimate errs, for docs/pixels.md: over episodes the student drives in its own
conditions, the median error by the block's distance from the gripper, and each episode's error split into its bias
(the norm of the episode's mean error) and the deviation around it (the mean distance of each step's error from that
mean).

    python docs/_tools/estimate_error.py STUDENT [--episodes 64] [--steps 200] [--visual-randomization off|JSON]

STUDENT: an estimator student (``distill --student estimator``: its ``student.onnx``, or its directory's
``student.npz``). ``--visual-randomization``: ``off``, or fields (JSON) that replace those of the student's own
(e.g. ``'{"camera_shift": 0, "camera_tilt": 0}'``). The episodes' keys come from seed 777.
"""

from __future__ import annotations

import argparse
import json
import time

import jax
import jax.numpy as jnp
import numpy as np

from so101_mjx.training import distill, estimator, pixel_policy, policies

BINS = ((0.0, 0.03), (0.03, 0.08), (0.08, np.inf))  # m, the block's distance from the gripper point
NEAR = 0.05  # m: the steps near the grasp


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("student")
    parser.add_argument("--episodes", type=int, default=64)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--visual-randomization", default="own", help="own, off, or fields replacing the own (JSON)")
    args = parser.parse_args()
    policy = policies.load(args.student)
    spec = policy.spec
    if spec is None or spec.estimator is None:
        raise SystemExit(f"{args.student} is not an estimator student")
    net, variables = pixel_policy.student(policy.params, spec)
    arrays, est, size = variables[estimator.COLLECTION], spec.estimator, spec.agent_pos
    own, choice = policy.env_config.get("visual_randomization"), args.visual_randomization
    visual = own if choice == "own" else None if choice == "off" else {**own, **json.loads(choice)}
    env = policy.make_env("c", visual_randomization=visual)

    def teacher(obs):  # the frozen teacher on the true block position
        true = (obs[size:] - arrays["estimate_mean"]) / arrays["estimate_std"]
        return estimator.act(arrays, est, obs[:size], true, jnp)

    start = time.perf_counter()
    collect = distill.collector(env, teacher, net, args.steps)
    out = jax.device_get(collect(variables, jax.random.split(jax.random.PRNGKey(777), args.episodes), False))
    mask, success = distill.visited(out)
    origin = distill.origin_arrays(env)
    error = np.asarray(out["estimate"] - out["state"])
    grip = np.asarray(estimator.gripper_point(origin, np.asarray(out["agent_pos"], np.float64)))
    distance = np.linalg.norm(grip - np.asarray(out["state"]), axis=-1)
    norm = np.linalg.norm(error, axis=-1)
    print(f"{args.student}: {args.episodes} episodes, visual randomization {args.visual_randomization}: success "
          f"{success.mean():.3f}, median error {1000 * np.median(norm[mask]):.1f} mm "
          f"({time.perf_counter() - start:.0f} s)")
    for low, high in BINS:
        steps = mask & (distance >= low) & (distance < high)
        where = f"{100 * low:.0f} to {100 * high:.0f} cm" if np.isfinite(high) else f"{100 * low:.0f} cm or more"
        print(f"  block {where} from the gripper: median error {1000 * np.median(norm[steps]):.1f} mm over "
              f"{steps.sum()} steps")
    for name, within in (("all steps", mask), (f"steps within {100 * NEAR:.0f} cm", mask & (distance < NEAR))):
        bias, deviation = [], []
        for b in range(args.episodes):
            e = error[b][within[b]]
            if len(e) > 3:
                mean = e.mean(0)
                bias.append(np.linalg.norm(mean))
                deviation.append(np.linalg.norm(e - mean, axis=-1).mean())
        print(f"  {name}: median over {len(bias)} episodes of the bias {1000 * np.median(bias):.1f} mm and of the "
              f"deviation around it {1000 * np.median(deviation):.1f} mm")


if __name__ == "__main__":
    main()
