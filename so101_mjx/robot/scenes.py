"""Scene files and MjModel loading.

The MJCF scenes live in the repository's top-level ``scenes/`` folder; an installed wheel
carries them as ``so101_mjx/scenes``.
"""

from __future__ import annotations

import re
from pathlib import Path

import mujoco
import numpy as np

from so101_mjx.errors import InputError, MissingFileError

ARM_JOINTS: tuple[str, ...] = ("shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll")
GRIPPER_JOINT = "gripper"
ROBOT_JOINTS: tuple[str, ...] = (*ARM_JOINTS, GRIPPER_JOINT)
EE_SITE = "gripperframe"
JAW_PADS: tuple[str, ...] = ("fixed_jaw_pad", "moving_jaw_pad")
# Collision bits of the arm's low links (see scenes/so101.xml): touch the block (1) and the floor (4).
_LOW_LINK_CONTYPE, _LOW_LINK_CONAFFINITY = 0, 5



def scenes_dir() -> Path:
    """Folder holding the MJCF scenes and ``meshes/`` (wheel layout first, then the source tree)."""
    package = Path(__file__).resolve().parent.parent
    for candidate in (package / "scenes", package.parent / "scenes"):
        if (candidate / "so101.xml").is_file():
            return candidate
    raise FileNotFoundError(
        f"so101_mjx scenes not found: looked for so101.xml in {package / 'scenes'} and {package.parent / 'scenes'}"
    )


def scene_names() -> list[str]:
    """Names of the scenes: every ``<name>.xml`` in :func:`scenes_dir` (``so101`` is the arm alone)."""
    return sorted(p.stem for p in scenes_dir().glob("*.xml"))


def scene_path(name: str) -> Path:
    """Path of a named scene (``scenes/<name>.xml``: ``so101``, ``pick_cube``, ...) or of an MJCF file."""
    path = Path(name)
    if path.suffix == ".xml":
        return path
    if name in scene_names():
        return scenes_dir() / f"{name}.xml"
    raise InputError(f"scene must be one of {scene_names()} or a path to an .xml file, got {name!r}")


def load_model(scene: str | Path = "pick_cube", *, jaw_pads: bool = False) -> mujoco.MjModel:
    """Compile a scene into an ``MjModel``.

    Args:
        scene: a name from :func:`scene_names` or a path to an MJCF file.
        jaw_pads: give the fingertip pads the low-link collision bits (block and floor), as the
            reference's ``jaw_pads`` option does. They are inert otherwise.

    Raises:
        FileNotFoundError: naming the scene or mesh file that is missing.
        ValueError: one line naming the file MuJoCo cannot compile, and why.
    """
    path = scene_path(str(scene)) if not isinstance(scene, Path) else scene
    if not path.is_file():
        raise MissingFileError(f"scene file not found: {path}")
    try:
        model = mujoco.MjModel.from_xml_path(str(path))
    except ValueError as err:
        missing = re.search(r"Error opening file '([^']+)'", str(err))
        if missing:
            raise MissingFileError(f"while loading {path}: file not found: {missing.group(1)}") from err
        raise InputError(f"{path}: MuJoCo cannot compile it: {' '.join(str(err).split())[:300]}") from None
    if jaw_pads:
        set_jaw_pads(model, True)
    return model


def fit_offscreen(model: mujoco.MjModel, height: int, width: int) -> None:
    """Grow ``model``'s offscreen buffer (``vis.global_.offheight`` / ``offwidth``, px) to hold ``height`` x
    ``width`` frames; a larger buffer is kept."""
    model.vis.global_.offheight = max(model.vis.global_.offheight, height)
    model.vis.global_.offwidth = max(model.vis.global_.offwidth, width)


def set_jaw_pads(model: mujoco.MjModel, enabled: bool) -> None:
    """Switch the fingertip pad collisions on (low-link bits) or off (inert bits 2/2), in place."""
    ids = [model.geom(name).id for name in JAW_PADS]
    model.geom_contype[ids] = _LOW_LINK_CONTYPE if enabled else 2
    model.geom_conaffinity[ids] = _LOW_LINK_CONAFFINITY if enabled else 2


def joint_qpos_ids(model: mujoco.MjModel, names: tuple[str, ...] = ARM_JOINTS) -> np.ndarray:
    """qpos addresses of named hinge joints, shape (len(names),)."""
    return np.asarray([model.joint(n).qposadr[0] for n in names])


def joint_dof_ids(model: mujoco.MjModel, names: tuple[str, ...] = ARM_JOINTS) -> np.ndarray:
    """qvel (dof) addresses of named hinge joints, shape (len(names),)."""
    return np.asarray([model.joint(n).dofadr[0] for n in names])


def actuator_ids(model: mujoco.MjModel, names: tuple[str, ...] = ARM_JOINTS) -> np.ndarray:
    """Actuator ids by name, shape (len(names),)."""
    return np.asarray([model.actuator(n).id for n in names])
