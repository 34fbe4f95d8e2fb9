"""lerobot robot plugin for so101_mjx: ``--robot.type=so101_mjx``, a simulated SO-101 follower.

lerobot (>= 0.6.0) imports each installed distribution whose metadata Name starts with
``lerobot_robot_`` (``register_third_party_plugins()``); importing this package registers
:class:`SO101MjxConfig` with lerobot's ``RobotConfig``, and ``make_robot_from_config`` finds
:class:`SO101Mjx` beside it (the config's class name without ``Config``).
"""

import importlib.util

if importlib.util.find_spec("lerobot") is not None:
    from lerobot_robot_so101_mjx.config_so101_mjx import SO101MjxConfig
    from lerobot_robot_so101_mjx.so101_mjx_robot import SO101Mjx

    __all__ = ["SO101Mjx", "SO101MjxConfig"]
