"""``ChainCfg``: the base config of every solver that builds a kinematic chain from a model.

A :class:`ChainCfg` (a :class:`~so101_mjx.ik.solvers.config.SolverCfg`) loads ``urdf_path`` (the
SO-101 by default) through MuJoCo and names the chain from ``root_link_name`` to ``end_link_name``;
:func:`solver_arguments` turns it into an :class:`~so101_mjx.ik.solvers.solver.SO101Solver`-family
constructor's arguments. The JAX, analytic, differential, Pinocchio and neural solvers' configs
subclass it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import mujoco

from so101_mjx.errors import InputError
from so101_mjx.ik.solvers.config import SolverCfg
from so101_mjx.robot.scenes import scene_path
from so101_mjx.robot.urdf import load_robot


def chain_joints(model: mujoco.MjModel, root: str, end_site: str) -> tuple[str, ...]:
    """The hinge joints from body ``root`` to the body of site ``end_site``, root first."""
    body, names = model.site(end_site).bodyid[0], []
    root_id = model.body(root).id
    while body != root_id:
        if body == 0:
            raise InputError(f"end_link_name {end_site!r} is not below root_link_name {root!r}")
        names += [model.joint(model.body_jntadr[body] + k).name for k in range(model.body_jntnum[body])
                  if model.jnt_type[model.body_jntadr[body] + k] == mujoco.mjtJoint.mjJNT_HINGE]
        body = model.body_parentid[body]
    return tuple(reversed(names))


@dataclass
class ChainCfg(SolverCfg):
    """A :class:`SolverCfg` whose model and chain :class:`SO101Solver`-family solvers build from."""

    def chain_kwargs(self) -> tuple[mujoco.MjModel, dict]:
        """The model (``urdf_path`` through MuJoCo; the end link gets a site if it is a body) and the
        constructor arguments of the chain: joints, root, site, TCP, weights and limits."""
        model, _ = load_robot(scene_path("so101") if self.urdf_path is None else self.urdf_path, self.end_link_name)
        root = self.root_link_name
        if mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, root) < 0:
            links = [model.body(b).name for b in range(1, model.nbody)]
            raise InputError(f"root_link_name {root!r} is not a link of the model; its links: {links}")
        joints = tuple(self.joint_names) if self.joint_names else chain_joints(model, root, self.end_link_name)
        return model, dict(joints=joints, root=root, site=self.end_link_name, tcp=self.tcp,
                           ik_nearest_weight=self.ik_nearest_weight, user_qpos_limits=self.user_qpos_limits)

    def solver_kwargs(self) -> dict:
        """Further constructor arguments of the solver (a subclass adds its fields)."""
        return {}


def solver_arguments(cfg, kwargs: dict) -> tuple[mujoco.MjModel | None, dict]:
    """``(model, kwargs)`` of an :class:`SO101Solver`-family constructor whose first argument ``cfg``
    is a :class:`ChainCfg` (its model and arguments, ``kwargs`` taking precedence), or a model / None."""
    if not isinstance(cfg, ChainCfg):
        return cfg, kwargs
    cfg = dataclasses.replace(cfg)  # validated again: the fields are assignable
    model, chain = cfg.chain_kwargs()
    return model, {**chain, **cfg.solver_kwargs(), **kwargs}
