"""Checkpoints: the params (Brax's Orbax format and ``params.npz``), the full training state for an
exact resume, and ``run.json``, the metadata that rebuilds a policy.

Layout of a run directory (``--out``)::

    run.json                   env name and full config, preset, seed, obs/action sizes,
                               network sizes, normalizer setting, library version
    checkpoints/000000204800/  one step:
        (Orbax files), ppo_network_config.json   brax.training.agents.ppo.checkpoint format
                               (SAC: sac_network_config.json and params (normalizer, policy), brax...sac.checkpoint)
        params.npz             the params (normalizer, policy, value; SAC: normalizer, policy, q):
                               what :func:`load` reads
        training_state.npz     :class:`so101_mjx.training.ppo_loop.LoopState`: params, Adam moments,
                               normalizer, env steps, the rollout's env states, the loop's and the
                               evaluator's keys
                               (SAC: :class:`so101_mjx.training.sac_loop.LoopState`, with the replay buffer)
        run.json               a copy of run.json with ``step``
    checkpoints/.staging/      where a step is written before it is published

A step is written into ``checkpoints/.staging/<step>/`` and renamed into ``checkpoints/`` once
complete, so a killed process leaves either the whole checkpoint or none (a step directory
without ``run.json`` is incomplete: ignored, and replaced when that step is written again).
The Orbax files are written for Brax's own tools; so101_mjx reads ``params.npz``. ``resolve`` accepts a run directory,
its ``checkpoints/`` directory or one step directory. Unreadable files raise a one-line ValueError naming the path.

Test hook: with ``SO101_MJX_KILL_AT=<point>:<step>`` set, :func:`kill_point` SIGKILLs the process
at that point (``train``: the epoch ending at ``step`` is computed, nothing of it written — what a
kill anywhere in the epoch leaves; ``orbax``: Orbax has renamed its directory, the rest of the
checkpoint is unwritten; ``checkpoint``: the checkpoint is published, its eval row is not
written). tests/training/test_resume.py uses it.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import jax
import numpy as np
from brax.training.acme import running_statistics, specs
from brax.training.agents.ppo import checkpoint as ppo_checkpoint
from brax.training.agents.sac import checkpoint as sac_checkpoint

from so101_mjx import _schema as schema

# the test hook, shared with the dataset writer
from so101_mjx._files import KILL_ENV, STAGING, atomic_path, atomic_write, kill_point  # noqa: F401
from so101_mjx.errors import InputError, MissingFileError, ParameterError
from so101_mjx.training import networks, npz
from so101_mjx.training.policy import NETWORK, NumpyPolicy, PolicyWeights, check_metadata

RUN_FILE = "run.json"
PARAMS_FILE = "params.npz"
STATE_FILE = "training_state.npz"
CHECKPOINTS = "checkpoints"
BUFFER_DATA = ".buffer.data"  # a SAC training state's replay buffer, (rows, transition size) float32


def write_run(path: Path, run: dict[str, Any]) -> None:
    atomic_write(path / RUN_FILE, json.dumps(run, indent=2, sort_keys=True))


def read_run(path: Path) -> dict[str, Any]:
    """``run.json`` of a step directory, checked: the fields that rebuild the env and the networks
    (:func:`~so101_mjx.training.policy.check_metadata`, ``network`` exactly :data:`~so101_mjx.training.policy.NETWORK`'s
    fields, ``normalize_observations``) and ``step``; ValueError naming the file and the field otherwise."""
    file = Path(path) / RUN_FILE
    if not file.is_file():
        raise InputError(f"{path} is not a so101_mjx checkpoint (no {RUN_FILE})")
    run = check_metadata(schema.read_json(file), file)
    schema.fields(file, run,
                  {"step": schema.integer(0), "network": schema.OBJECT, "normalize_observations": schema.BOOL},
                  label="metadata field")
    schema.fields(file, run["network"], NETWORK, where="network.", label="metadata field", extra=False)
    return run


def steps(run_dir: Path) -> list[Path]:
    """Complete step directories under ``run_dir/checkpoints``, oldest first."""
    root = Path(run_dir) / CHECKPOINTS
    found = [p for p in root.glob("[0-9]" * 12) if (p / RUN_FILE).is_file()] if root.is_dir() else []
    return sorted(found, key=lambda p: int(p.name))


def resolve(path: str | Path) -> Path:
    """The step directory meant by ``path`` (latest step for a run or checkpoints directory)."""
    path = Path(path)
    if not path.exists():
        raise MissingFileError(f"checkpoint not found: {path}")
    if (path / RUN_FILE).is_file() and path.parent.name == CHECKPOINTS:
        return path
    found = steps(path.parent if path.name == CHECKPOINTS else path)
    if not found:
        raise InputError(f"no complete checkpoint under {path} (expected {CHECKPOINTS}/<step>/{RUN_FILE})")
    return found[-1]


def save(run_dir: Path, step: int, params: Any, run: dict[str, Any], state: Any = None) -> Path:
    """Write step ``step``: params ``(normalizer, policy, value)``, the loop ``state`` if given, run.json.

    Staged under ``checkpoints/.staging/`` and renamed into ``checkpoints/`` when complete. In a
    multi-process run only process 0 calls it, and the step holds no Orbax copy of the params for
    Brax's ``ppo_checkpoint.load`` (Orbax saves collectively across processes); everything this
    library reads is there.
    """
    root = Path(run_dir).absolute() / CHECKPOINTS  # Orbax wants absolute paths
    staged, path = root / STAGING / f"{step:012d}", root / f"{step:012d}"
    shutil.rmtree(staged, ignore_errors=True)
    if jax.process_count() == 1:  # Orbax's save is collective across processes: see the docstring
        _save_orbax(root / STAGING, step, params, run)
    else:
        staged.mkdir(parents=True)
    kill_point("orbax", step)
    _save_tree(staged / PARAMS_FILE, params)
    if state is not None:
        _save_tree(staged / STATE_FILE, state)
    write_run(staged, {**run, "step": step})
    shutil.rmtree(path, ignore_errors=True)  # an incomplete directory (no run.json) of an interrupted write
    staged.rename(path)
    return path


def algo(run: dict[str, Any]) -> str:
    """The run's algorithm: run.json's ``algo``, or ``"ppo"`` for a run.json written before the field existed."""
    return run.get("algo", "ppo")


def _save_orbax(root: Path, step: int, params: Any, run: dict[str, Any]) -> None:
    """The params in Brax's own checkpoint format of the run's algorithm."""
    args = (run["obs_size"], run["action_size"], run["normalize_observations"])
    if algo(run) == "sac":  # Brax's SAC policy takes (normalizer, policy)
        config = sac_checkpoint.network_config(*args, networks.sac_network_factory(**run["network"]))
        sac_checkpoint.save(root, step, params[:2], config)
    else:
        ppo_checkpoint.save(root, step, params,
                            ppo_checkpoint.network_config(*args, networks.network_factory(**run["network"])))


def load(path: str | Path) -> tuple[dict[str, Any], Any]:
    """``(run, params)`` of the checkpoint meant by ``path`` (see :func:`resolve`)."""
    step_dir = resolve(path)
    run = read_run(step_dir)
    return run, _load_tree(step_dir / PARAMS_FILE, _params_template(run), exact=False)


def load_state(path: str | Path, template: Any) -> Any:
    """The training state saved at the checkpoint ``path``, as a pytree like ``template``.

    Every array's name, shape and dtype are checked against ``template`` in the file's headers,
    before any data is read; then every float must be finite and a SAC replay buffer's positions
    lie in it (:func:`_check_values`). A SAC buffer smaller than ``template``'s (a resume with a
    larger ``--num-timesteps``) grows, its transitions kept. ValueError naming the file otherwise
    (another num_envs, network, device count or float precision; a damaged or poisoned state).
    """
    return _load_tree(_state_file(path), template, exact=True)


def _state_file(path: str | Path) -> Path:
    step_dir = resolve(path)
    if not (step_dir / STATE_FILE).is_file():
        raise InputError(f"{step_dir} holds no {STATE_FILE}: it cannot be resumed exactly")
    return step_dir / STATE_FILE


def read_policy(path: str | Path) -> tuple[NumpyPolicy, Any]:
    """``(deterministic policy, Brax params)`` of a checkpoint (run, checkpoints or step directory), its
    ``run.json`` as the policy's metadata; InputError naming the step directory when either is unusable
    (:meth:`~so101_mjx.training.policy.NumpyPolicy.checked`). Policies are loaded by
    :func:`so101_mjx.training.policies.load`."""
    step_dir = resolve(path)
    run, params = load(step_dir)  # run.json checked
    try:
        weights = PolicyWeights.from_params(params, run["normalize_observations"], run["network"]["activation"])
    except (KeyError, TypeError, IndexError) as err:
        raise InputError(f"{step_dir}: params do not hold a Brax policy network: {err!r}") from None
    return NumpyPolicy.checked(weights, run, step_dir), params


def inference_fn(run: dict[str, Any], params: Any):
    """Brax's deterministic policy for a loaded checkpoint: obs -> env action."""
    factory = networks.network_factory(**run["network"])
    return networks.inference_fn(factory, run["obs_size"], run["action_map"], run["normalize_observations"], params)


def _params_template(run: dict[str, Any]) -> tuple[Any, Any, Any]:
    """Params ``(normalizer, policy, value)`` of ``run``'s network (SAC: ``(normalizer, policy, q)``), freshly
    initialized."""
    normalizer = running_statistics.init_state(specs.Array((run["obs_size"],), np.dtype("float32")))
    key = jax.random.PRNGKey(0)
    if algo(run) == "sac":
        network = networks.sac_network_factory(**run["network"])(run["obs_size"], run["action_size"])
        return normalizer, network.policy_network.init(key), network.q_network.init(key)
    network = networks.network_factory(**run["network"])(run["obs_size"], run["action_size"])
    return normalizer, network.policy_network.init(key), network.value_network.init(key)


def _save_tree(file: Path, tree: Any) -> None:
    """The leaves of ``tree`` as an ``.npz``, named by their key paths."""
    leaves = jax.tree_util.tree_flatten_with_path(tree)[0]
    with atomic_path(file) as tmp, open(tmp, "wb") as out:
        # numpy's stub: **arrays could name allow_pickle
        np.savez(out, **{jax.tree_util.keystr(p): np.asarray(v) for p, v in leaves})  # type: ignore[arg-type]


def _check_values(file: Path, arrays: dict[str, np.ndarray]) -> None:
    """Every array real (no complex, string or object arrays) with finite floats (a NaN in the state
    would train on as NaN); a SAC replay buffer's positions inside it (Brax's queue:
    ``0 <= sample_position <= insert_position <= rows``)."""
    for name, value in arrays.items():
        schema.array(file, name, value, kinds="biuf")
    if BUFFER_DATA in arrays:
        rows = arrays[BUFFER_DATA].shape[0]
        insert, sample = (int(arrays.get(f".buffer.{k}_position", 0)) for k in ("insert", "sample"))
        if not 0 <= insert <= rows:
            raise InputError(f"{file}: .buffer.insert_position must be in [0, {rows}] (the replay buffer's size), "
                             f"got {insert}")
        if not 0 <= sample <= insert:
            raise InputError(f"{file}: .buffer.sample_position must be in [0, insert_position = {insert}], "
                             f"got {sample}")


def _header_problems(file: Path, found: dict[str, npz.Header], wanted: dict[str, np.ndarray], exact: bool) -> list[str]:
    """What keeps the arrays of ``file`` (their headers ``found``) from being ``wanted``'s leaves: missing or
    unexpected names, other shapes or dtypes (with ``exact``; else dtype kinds). A SAC replay buffer may
    have fewer rows than ``wanted``'s (it grows); more rows is an InputError of its own."""
    for name, (shape, dtype) in found.items():
        if dtype.kind not in "biuf":
            raise InputError(f"{file}: {name} must be a real (not complex) numeric array, got {dtype} array of "
                             f"shape {shape}")
    problems = [f"{n} missing" for n in wanted if n not in found]
    problems += [f"unexpected {n}" for n in found.keys() - wanted.keys()]
    for name, want in wanted.items():
        if name not in found:
            continue
        shape, dtype = found[name]
        if name == BUFFER_DATA and shape[1:] == want.shape[1:] and dtype == want.dtype and shape[0] != want.shape[0]:
            if shape[0] < want.shape[0]:
                continue
            raise ParameterError(f"{file}: the replay buffer holds {shape[0]:,} transitions, this run's "
                                 f"{want.shape[0]:,}: SAC's replay buffer holds max_replay_size transitions (default: "
                                 "num_timesteps), and a resume can grow it, not shrink it: resume with num_timesteps "
                                 f"(or max_replay_size) of at least {shape[0]:,}", "num_timesteps")
        if shape != want.shape or (dtype != want.dtype if exact else dtype.kind != want.dtype.kind):
            problems.append(f"{name} {dtype}{list(shape)} vs {want.dtype}{list(want.shape)} here")
    return problems


def _load_tree(file: Path, template: Any, exact: bool) -> Any:
    """``template`` with its leaves read from ``file`` (written by :func:`_save_tree`): the same
    names and shapes, and each leaf's dtype kind (float, int, ...), checked in the file's headers
    before any data is read; with ``exact`` (a training state) its dtype and :func:`_check_values`."""
    leaves, treedef = jax.tree_util.tree_flatten_with_path(template)
    wanted = {jax.tree_util.keystr(p): np.asarray(leaf) for p, leaf in leaves}

    def check(found: dict[str, npz.Header]) -> None:
        problems = _header_problems(file, found, wanted, exact)
        if problems:
            raise InputError(f"{file} does not fit this run (another num_envs, network, device count or float "
                             f"precision?): {'; '.join(problems[:3])}")

    arrays = npz.read(file, check, "checkpoint file")
    if exact:
        _check_values(file, arrays)
    # a larger buffer: the rest empty
    if BUFFER_DATA in arrays and arrays[BUFFER_DATA].shape != wanted[BUFFER_DATA].shape:
        grown = np.zeros_like(wanted[BUFFER_DATA])
        grown[: len(arrays[BUFFER_DATA])] = arrays[BUFFER_DATA]
        arrays[BUFFER_DATA] = grown
    return jax.tree_util.tree_unflatten(treedef, [arrays[n] for n in wanted])
