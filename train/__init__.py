"""Brax PPO training for the so101_mjx envs, and export and CPU replay of the trained policies.

- :mod:`train.config`: presets (PPO hyperparameters, network sizes, env overrides) per env.
- :mod:`train.envs`: env construction and the Brax adapter (policy-to-env action map, metrics).
- :mod:`train.networks`: PPO networks and Brax's deterministic inference function.
- :mod:`train.policy`: the deterministic policy as numpy arrays and its numpy runner (no JAX).
- :mod:`train.loop`: Brax's PPO loop, owned so that its whole state is checkpointed (exact resume).
- :mod:`train.checkpoint`: checkpoints (Orbax params, params and training state as .npz, run metadata).
- :mod:`train.progress`: console progress, CSV, TensorBoard and the learning-curve PNG.
- :mod:`train.ppo`: a training run: presets, logs, checkpoints, resume (``so101-mjx train``).
- :mod:`train.export`: ONNX and ``.npz`` export (``so101-mjx export``).
- :mod:`train.replay`: an exported policy in the gymnasium CPU env (``so101-mjx replay``).
- :mod:`train.evaluate`: a checkpoint or exported policy in the jitted env on mjx and/or c (``so101-mjx eval``).
"""
