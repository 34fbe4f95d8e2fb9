"""The SO-101 as a URDF, written from the MJCF model, and robot files loaded through MuJoCo.

:func:`mjcf_to_urdf` writes the kinematic tree below a root body of a compiled ``MjModel``: one
link per body (its mass, centre of mass and principal inertia), one revolute joint per hinge (its
frame, axis, range, damping and friction; the effort limit from its actuator's force range) and
one fixed child link per site. The repository's ``scenes/so101.urdf`` is this function's output for
the ``so101`` scene (:func:`write_so101_urdf` regenerates it). :func:`load_robot` loads any URDF through
MuJoCo's URDF import (fixed links kept as bodies, :func:`urdf_xml`) or an MJCF, and gives a named end link a site.
"""

from __future__ import annotations

import math
import os
import xml.etree.ElementTree as ET
from pathlib import Path
from xml.sax.saxutils import quoteattr

import mujoco
import numpy as np

from so101_mjx.errors import InputError, MissingFileError
from so101_mjx.robot import rotations as R
from so101_mjx.robot.scenes import load_model, scenes_dir

VELOCITY_LIMIT = 10.0  # rad/s, URDF requires one and the MJCF has none: the reference's URDF value
def _num(values) -> str:
    return " ".join(repr(float(v)) for v in np.atleast_1d(values))


def _origin(pos, quat) -> str:
    return f'<origin xyz="{_num(pos)}" rpy="{_num(R.mat_to_rpy(R.quat_to_mat_np(quat)))}"/>'


def _link(model: mujoco.MjModel, b: int) -> list[str]:
    i = model.body_inertia[b]
    return [f"  <link name={quoteattr(model.body(b).name)}>", "    <inertial>",
            f"      {_origin(model.body_ipos[b], model.body_iquat[b])}",
            f'      <mass value="{_num(model.body_mass[b])}"/>',
            f'      <inertia ixx="{_num(i[0])}" ixy="0.0" ixz="0.0" iyy="{_num(i[1])}" iyz="0.0" izz="{_num(i[2])}"/>',
            "    </inertial>", "  </link>"]


def _effort(model: mujoco.MjModel, joint: int) -> float:
    """The force range of the joint's actuator (N·m), 0 when it has none."""
    for a in range(model.nu):
        if model.actuator_trnid[a, 0] == joint and model.actuator_forcelimited[a]:
            return float(np.max(np.abs(model.actuator_forcerange[a])))
    return 0.0


def _joint(model: mujoco.MjModel, b: int, parent: str) -> list[str]:
    name, child = model.body(b).name, quoteattr(model.body(b).name)
    if model.body_jntnum[b] == 0:
        return [f"  <joint name={quoteattr(name + '_fixed')} type=\"fixed\">",
                f"    <parent link={quoteattr(parent)}/>",
                f"    <child link={child}/>", f"    {_origin(model.body_pos[b], model.body_quat[b])}", "  </joint>"]
    j = model.body_jntadr[b]
    if model.body_jntnum[b] > 1 or model.jnt_type[j] != mujoco.mjtJoint.mjJNT_HINGE or np.any(model.jnt_pos[j] != 0):
        raise InputError(f"body {name!r}: only one hinge anchored at the body origin converts to a URDF joint")
    lo, hi = model.jnt_range[j] if model.jnt_limited[j] else (-math.pi, math.pi)
    dof = model.jnt_dofadr[j]
    return [f"  <joint name={quoteattr(model.joint(j).name)} "
            f"type=\"{'revolute' if model.jnt_limited[j] else 'continuous'}\">",
            f"    <parent link={quoteattr(parent)}/>", f"    <child link={child}/>",
            f"    {_origin(model.body_pos[b], model.body_quat[b])}", f'    <axis xyz="{_num(model.jnt_axis[j])}"/>',
            f'    <limit lower="{_num(lo)}" upper="{_num(hi)}" effort="{_num(_effort(model, j))}" '
            f'velocity="{_num(VELOCITY_LIMIT)}"/>',
            f'    <dynamics damping="{_num(model.dof_damping[dof])}" friction="{_num(model.dof_frictionloss[dof])}"/>',
            "  </joint>"]


def _site(model: mujoco.MjModel, s: int) -> list[str]:
    name, parent = model.site(s).name, model.body(model.site_bodyid[s]).name
    return [f"  <link name={quoteattr(name)}/>", f"  <joint name={quoteattr(name + '_fixed')} type=\"fixed\">",
            f"    <parent link={quoteattr(parent)}/>", f"    <child link={quoteattr(name)}/>",
            f"    {_origin(model.site_pos[s], model.site_quat[s])}", "  </joint>"]


def mjcf_to_urdf(model: mujoco.MjModel, root: str = "base", name: str | None = None) -> str:
    """URDF text of the tree below body ``root`` (see the module docstring); ``root`` must sit at the
    world origin. Floats are written exactly (shortest round-trip decimal); no geometry is written."""
    root_id = model.body(root).id
    if (np.any(model.body_pos[root_id] != 0) or np.any(model.body_quat[root_id] != [1, 0, 0, 0])
            or model.body_jntnum[root_id]):
        raise InputError(f"root body {root!r} must be fixed at the world origin to become the URDF's root link")
    bodies = [root_id] + [b for b in range(root_id + 1, model.nbody) if _below(model, b, root_id)]
    robot = name or mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_MODEL, 0) or "robot"
    lines = ['<?xml version="1.0"?>', f"<!-- Written by so101_mjx.robot.urdf.mjcf_to_urdf from the {robot} MJCF. -->",
             f"<robot name={quoteattr(robot)}>",
             '  <mujoco><compiler fusestatic="false" discardvisual="true" angle="radian"/></mujoco>']
    for b in bodies:
        lines += _link(model, b)
        if b != root_id:
            lines += _joint(model, b, model.body(model.body_parentid[b]).name)
    for s in range(model.nsite):
        if model.site_bodyid[s] in bodies:
            lines += _site(model, s)
    return "\n".join([*lines, "</robot>", ""])


def _below(model: mujoco.MjModel, body: int, root: int) -> bool:
    while body > 0:
        if body == root:
            return True
        body = model.body_parentid[body]
    return False


def so101_urdf_path() -> Path:
    """The shipped SO-101 URDF, ``scenes/so101.urdf``."""
    return scenes_dir() / "so101.urdf"


def write_so101_urdf(path: str | os.PathLike | None = None) -> Path:
    """(Re)write the SO-101 URDF from the ``so101`` scene; default :func:`so101_urdf_path`."""
    path = Path(so101_urdf_path() if path is None else path)
    path.write_text(mjcf_to_urdf(load_model("so101")))
    return path


def urdf_xml(path: str | os.PathLike, field: str = "urdf_path") -> str:
    """The text of URDF file ``path`` with MuJoCo's compiler options that keep every link a body.

    MuJoCo's URDF import fuses links without a moving joint into their parents (``fusestatic``)
    unless the URDF says otherwise, so a fixed root or tool link would lose its name. This sets
    ``<mujoco><compiler fusestatic="false"/></mujoco>`` (adding the element where missing), plus
    ``discardvisual="true"`` and ``meshdir`` (the file's folder; a relative one made absolute)
    unless given. InputError naming ``field`` if the file is not XML with a ``<robot>`` root.
    """
    path = Path(path)
    try:
        robot = ET.parse(path).getroot()
    except ET.ParseError as err:
        raise InputError(f"{field} {path}: not a readable URDF (XML error: {err})") from None
    if robot.tag != "robot":
        raise InputError(f"{field} {path}: a URDF's root element must be <robot>, got <{robot.tag}>")
    ext = robot.find("mujoco")
    ext = ET.SubElement(robot, "mujoco") if ext is None else ext
    compiler = ext.find("compiler")
    compiler = ET.SubElement(ext, "compiler") if compiler is None else compiler
    compiler.set("fusestatic", "false")
    compiler.set("discardvisual", compiler.get("discardvisual", "true"))
    compiler.set("meshdir", str((path.resolve().parent / compiler.get("meshdir", ".")).resolve()))
    return ET.tostring(robot, encoding="unicode")


def load_robot(path: str | os.PathLike, end_link: str | None = None) -> tuple[mujoco.MjModel, bool]:
    """Compile a URDF (MuJoCo's URDF import, every link kept as a body: :func:`urdf_xml`) or MJCF file;
    ``end_link``, when the model has no site of that name but a body, gets a site at the body's origin.
    Returns the model and whether a site was added.

    Raises MissingFileError for a missing file, InputError naming the file when MuJoCo cannot load it
    or ``end_link`` names neither a site nor a body.
    """
    path = Path(path)
    if not path.is_file():
        raise MissingFileError(f"urdf_path: file not found: {path}")
    try:
        urdf = path.suffix.lower() == ".urdf"
        spec = mujoco.MjSpec.from_string(urdf_xml(path)) if urdf else mujoco.MjSpec.from_file(str(path))
    except ValueError as err:
        raise InputError(f"urdf_path {path}: MuJoCo cannot load it: {' '.join(str(err).split())[:300]}") from None
    added = False
    if end_link is not None and spec.site(end_link) is None:
        body = spec.body(end_link)
        if body is None:
            raise InputError(f"end_link_name {end_link!r} is neither a site nor a link of {path}")
        body.add_site(name=end_link)
        added = True
    try:
        return spec.compile(), added
    except ValueError as err:
        raise InputError(f"urdf_path {path}: MuJoCo cannot compile it: {' '.join(str(err).split())[:300]}") from None
