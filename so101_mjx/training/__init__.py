"""Brax PPO and SAC training for the so101_mjx envs, and export and CPU replay of the trained policies.

- :mod:`so101_mjx.training.presets`: presets (PPO or SAC hyperparameters, network sizes, env overrides) per env, one
  module per task.
- :mod:`so101_mjx.training.brax_env`: env construction and the Brax adapter (policy-to-env action map, metrics).
- :mod:`so101_mjx.training.networks`: PPO and SAC networks and Brax's deterministic inference function.
- :mod:`so101_mjx.training.policy`: the deterministic policy as numpy arrays and its numpy runner (no JAX).
- :mod:`so101_mjx.training.ppo_loop`: Brax's PPO loop, owned so that its whole state is checkpointed (exact resume).
- :mod:`so101_mjx.training.sac_loop`: Brax's SAC in an owned loop, its replay buffer in the checkpoint (exact resume).
- :mod:`so101_mjx.training.checkpoint`: checkpoints (Orbax params, params and training state as .npz, run metadata).
- :mod:`so101_mjx.training.npz`: ``.npz`` reading with every array's header checked before its data is read.
- :mod:`so101_mjx.training.progress`: console progress, CSV, TensorBoard and the learning-curve PNG.
- :mod:`so101_mjx.training.ppo`: a training run: presets, logs, checkpoints, resume (``so101-mjx train``).
- :mod:`so101_mjx.training.export`: ONNX and ``.npz`` export (``so101-mjx export``).
- :mod:`so101_mjx.training.policies`: ``load(path) -> Policy``, the one loader of checkpoints, exports and pixel
  students.
- :mod:`so101_mjx.training.replay`: an exported policy in the gymnasium CPU env (``so101-mjx replay``).
- :mod:`so101_mjx.training.evaluate`: a checkpoint or exported policy in the jitted env on mjx and/or c (``so101-mjx
  eval``).
"""
