"""The built-in tasks, one file each; :mod:`so101_mjx.envs.registry` registers :data:`BUILTIN`.

A task of your own needs no file here: define the class anywhere and call
:func:`so101_mjx.envs.registry.register` (``so101_mjx.register``) on it.
"""

from so101_mjx.envs.tasks.pick_cube import PickCube
from so101_mjx.envs.tasks.pick_place import PickPlace
from so101_mjx.envs.tasks.push_cube import PushCube
from so101_mjx.envs.tasks.reach import Reach
from so101_mjx.envs.tasks.stack_cube import StackCube

BUILTIN = (Reach, PickCube, PickPlace, PushCube, StackCube)

__all__ = ["BUILTIN", "PickCube", "PickPlace", "PushCube", "Reach", "StackCube"]
