"""Brax PPO training for the so101_mjx envs, and export and CPU replay of the trained policies.

- :mod:`train.config`: presets (PPO hyperparameters, network sizes, env overrides) per env.
- :mod:`train.envs`: env construction and the Brax adapter (policy-to-env action map, metrics).
- :mod:`train.networks`: PPO networks and Brax's deterministic inference function.
- :mod:`train.policy`: the deterministic policy as numpy arrays and its numpy runner (no JAX).
- :mod:`train.checkpoint`: Orbax checkpoints plus the run metadata needed to rebuild a policy.
- :mod:`train.progress`: console progress, CSV, TensorBoard and the learning-curve PNG.
- :mod:`train.ppo`: the training loop (``so101-mjx train``).
- :mod:`train.export`: ONNX and ``.npz`` export (``so101-mjx export``).
- :mod:`train.replay`: an exported policy in the gymnasium CPU env (``so101-mjx replay``).
"""
