"""``so101-mjx train`` / ``python -m train.ppo``: Brax PPO (default) or SAC (``--algo sac``) on a registered env.

One command trains, checkpoints at every eval, and optionally exports and replays on CPU::

    so101-mjx train --env SO101Reach-v0 --export --replay-episodes 100

writes ``runs/SO101Reach-v0-cpu-s0/`` (``run.json``, ``checkpoints/<step>/``, ``metrics.csv``,
``tb/``, ``learning_curve.png``, ``policy.onnx``, ``policy.npz``). The loop is
:func:`so101_mjx.training.ppo_loop.train` (Brax's PPO, same params bitwise as ``brax...ppo.train.train``). A run is
deterministic for a given ``--seed`` on a given machine and backend, and ``--resume`` is exact: it
continues from the latest checkpoint in ``--out`` with the whole training state (params, Adam
moments, normalizer, env steps, the rollout's env states and RNG keys), re-runs that checkpoint's
eval, rewrites ``metrics.csv`` to the rows before it, and ends with the params and metrics of the
uninterrupted run (bitwise on backend ``c``; tests/training/test_resume.py kills runs with SIGKILL at
several moments). Killed before its first checkpoint, a run restarts at step 0 on ``--resume``.
An epoch that makes the training state non-finite stops the run (one line, exit status 1) before
that step is written. The algorithm is the preset's (:class:`~so101_mjx.training.preset.Preset` for PPO,
:class:`~so101_mjx.training.preset.SacPreset` for :mod:`so101_mjx.training.sac_loop`, whose
checkpoints add the replay buffer); everything around the loop is the same for both.
"""

from __future__ import annotations

import contextlib
import functools
import time
from pathlib import Path
from typing import Any

import so101_mjx
from so101_mjx._lock import exclusive
from so101_mjx.envs.base import asdict
from so101_mjx.envs.registry import canonical
from so101_mjx.errors import InputError, ParameterError
from so101_mjx.training import brax_env, checkpoint, presets
from so101_mjx.training.jax_caches import released_pmap_traces
from so101_mjx.training.observation_noise import ObservationNoise
from so101_mjx.training.progress import CSV_FILE, Recorder, read_csv

COMPATIBLE_KEYS = ("algo", "env", "obs_size", "action_size", "network", "normalize_observations")


def run_metadata(env_name: str, preset_name: str, preset: presets.TrainingPreset, env, seed: int,
                 variant: str | dict[str, Any] | None = None) -> dict[str, Any]:
    """Everything export and replay need to rebuild the env and the policy (``variant``: the env variant
    laid over the preset, by name or as its fields, recorded as ``env_variant``)."""
    return {
        "algo": preset.algo,
        "env": env_name,
        "env_config": asdict(env.config),
        "preset": preset_name,
        "env_variant": variant,
        "preset_config": preset.asdict(),
        "seed": seed,
        "backend": env.backend,
        "obs_size": env.observation_size,
        "action_size": env.action_size,
        "network": preset.network(),
        "normalize_observations": preset.normalize_observations,
        "action_map": dict(zip(("scale", "offset"), (x.tolist() for x in brax_env.action_map(env)))),
        "version": so101_mjx.__version__,
    }


def _resume_point(out: Path, run: dict[str, Any], resume: bool) -> Path | None:
    """The checkpoint to continue from, after checking it belongs to this run; None to start at step 0.

    ``resume`` of a run killed before its first checkpoint (``run.json`` written, no checkpoint)
    starts it again from step 0.
    """
    existing = checkpoint.steps(out)
    if not resume:
        if existing:
            raise ParameterError(f"{out} already holds checkpoints; pass resume=True to continue it or choose "
                                 "another directory", "resume=True")
        return None
    if not existing:
        if (out / checkpoint.RUN_FILE).is_file():
            print(f"resume: no checkpoint under {out} yet: starting from step 0")
            return None
        raise ParameterError(f"resume=True: no checkpoint under {out}", "resume=True")
    previous = checkpoint.read_run(existing[-1])
    saved = {**{k: previous.get(k) for k in COMPATIBLE_KEYS}, "algo": checkpoint.algo(previous)}
    diff = [f"{k} {saved[k]!r} vs {run[k]!r}" for k in COMPATIBLE_KEYS if saved[k] != run[k]]
    if diff:
        raise ParameterError(f"resume=True: checkpoint {existing[-1]} does not fit this run (checkpoint vs run): "
                             f"{', '.join(diff)}", "resume=True")
    return existing[-1]  # its state is read and checked before anything is written: _Writer.restore


def demo_starts(env, preset: presets.TrainingPreset, seed: int) -> dict[str, Any]:
    """``starts`` and ``start_prob`` of the training env: the preset's demonstration starts, or none."""
    if not preset.demo_start_prob:
        return {}
    import jax

    from so101_mjx.training.demo_starts import scripted_bank

    start = time.perf_counter()
    bank = scripted_bank(env, jax.random.fold_in(jax.random.PRNGKey(seed), 0xDE70), preset.demo_start_episodes)
    print(f"demo starts: p={preset.demo_start_prob}, {bank.done.shape[0]} states from {preset.demo_start_episodes} "
          f"scripted episodes ({time.perf_counter() - start:.0f} s)", flush=True)
    return {"starts": bank, "start_prob": preset.demo_start_prob}


def _loop(preset: presets.TrainingPreset, run: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """``(loop module, its algorithm-specific arguments)`` for ``preset``, after checking its sizes
    (SAC: its replay buffer fits the device's memory and the host's)."""
    import jax

    from so101_mjx.training import networks

    if preset.algo == "sac":
        from so101_mjx.training import sac_loop

        assert isinstance(preset, presets.SacPreset)  # the preset class of algo "sac"
        if jax.process_count() > 1:
            raise InputError(f"SAC trains in one process, not {jax.process_count()}")
        sac_loop.check_memory(preset.max_replay_size or preset.num_timesteps, run["obs_size"], run["action_size"])
        return sac_loop, {"network_factory": networks.sac_network_factory(**run["network"])}
    from so101_mjx.training import ppo_loop

    assert isinstance(preset, presets.Preset)  # the preset class of algo "ppo"
    ppo_loop.check_sizes(preset.num_timesteps, preset.num_envs, preset.batch_size, preset.num_minibatches,
                         jax.device_count())
    return ppo_loop, {"network_factory": networks.network_factory(**run["network"]), "use_pmap_on_reset": False}


class _Writer:
    """What a run writes into ``out`` (process 0 only): ``run.json``, then ``metrics.csv`` and TensorBoard
    through a :class:`~so101_mjx.training.progress.Recorder`; :meth:`begin` starts them, after a resumed
    state was read and checked, so that a refused state leaves ``out`` as it was."""

    def __init__(self, out: Path, run: dict[str, Any], total_steps: int, step: int, primary: bool):
        self.out, self.run, self.total_steps, self.step, self.primary = out, run, total_steps, step, primary
        self.recorder: Recorder | None = None

    def begin(self) -> None:
        if self.primary and self.recorder is None:
            checkpoint.write_run(self.out, self.run)
            self.recorder = Recorder(self.out, self.total_steps, self.step)

    def restore(self, step_dir: Path, template: Any) -> Any:
        """The checked state of ``step_dir`` (:func:`~so101_mjx.training.checkpoint.load_state`), then :meth:`begin`."""
        state = checkpoint.load_state(step_dir, template)
        self.begin()
        return state

    def __call__(self, step: int, metrics: dict[str, Any]) -> None:
        if self.recorder is not None:
            self.recorder(step, metrics)


def train(
    env_name: str, preset_name: str, preset: presets.TrainingPreset, out: Path, *,
    backend: str | None = None, seed: int = 0, resume: bool = False, variant: str | dict[str, Any] | None = None,
) -> tuple[Path, dict[str, Any]]:
    """Train (or resume) into ``out``, holding its writer lock. Returns the last checkpoint and the last eval's metrics.
    Every size is checked before ``out`` is created; a resumed state before anything is written.
    :class:`~so101_mjx.training.finite.NonFiniteError` when an epoch makes the training state
    non-finite (that step is not written)."""
    import jax

    env_name = canonical(env_name)
    env = brax_env.make_env(env_name, preset.env_overrides(), backend)
    run = run_metadata(env_name, preset_name, preset, env, seed, variant)
    trained = ObservationNoise(env, preset.observation_noise) if preset.observation_noise else env
    loop, loop_args = _loop(preset, run)
    primary = jax.process_index() == 0  # the one process that writes the run directory
    with exclusive(out, "training run") if primary else contextlib.nullcontext():
        restore = _resume_point(out, run, resume)
        step = checkpoint.read_run(restore)["step"] if restore else 0
        rows = read_csv(out / CSV_FILE)
        if step >= preset.total_steps and rows and rows[-1]["step"] == step:
            print(f"{out}: already trained {step:,} of {preset.total_steps:,} steps")
            assert restore is not None  # step >= total_steps >= 1: read from a checkpoint
            return restore, {}
        writer = _Writer(out, run, preset.total_steps, step, primary)
        if restore is None:
            writer.begin()

        def save(step: int, params, state) -> None:
            checkpoint.kill_point("train", step)
            checkpoint.save(out, step, params, run, state)
            checkpoint.kill_point("checkpoint", step)

        shown = f" env-config={presets.variant_label(variant)}" if presets.variant_label(variant) else ""
        print(f"{env_name} preset={preset_name}{shown} ({preset.algo}) backend={env.backend} seed={seed} "
              f"obs={run['obs_size']} steps {step:,} -> {preset.total_steps:,} into {out}", flush=True)
        wrap = functools.partial(brax_env.wrap_env_fn, success_bonus=preset.success_bonus)
        with released_pmap_traces():
            _, _, metrics = loop.train(
                trained,
                wrap_env_fn=functools.partial(wrap, **demo_starts(trained, preset, seed)),
                wrap_eval_env_fn=wrap,
                episode_length=env.episode_length,
                seed=seed,
                deterministic_eval=True,
                progress_fn=writer,
                checkpoint_fn=save,
                restore=None if restore is None else functools.partial(writer.restore, restore),
                **loop_args,
                **preset.loop_kwargs(),
            )
        if not primary:
            return out, metrics
        assert writer.recorder is not None  # the primary's: begin() (or restore()) made it
        png = writer.recorder.close(f"{env_name} ({preset_name}, seed {seed})")
        print(f"metrics: {out / CSV_FILE}  curve: {png}  TensorBoard: {out / 'tb'}")
        return checkpoint.resolve(out), metrics
