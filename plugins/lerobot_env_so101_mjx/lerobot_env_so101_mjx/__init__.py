"""lerobot env plugin for so101_mjx: ``--env.type=so101_mjx --env.task=<task>`` for every task in
``so101_mjx.envs.names()``.

lerobot (>= 0.6.0) imports each installed distribution whose metadata Name starts with
``lerobot_env_`` (``register_third_party_plugins()``); importing this package then registers
:class:`lerobot_env_so101_mjx.configuration.SO101MjxEnv` with lerobot's ``EnvConfig``. Without
lerobot only :mod:`lerobot_env_so101_mjx.spec` (features and gym kwargs, no torch) is usable.
"""

import importlib.util

if importlib.util.find_spec("lerobot") is not None:
    from lerobot_env_so101_mjx import configuration as configuration
