"""``CfgSolver``: an :class:`~so101_mjx.ik.solvers.solver.SO101Solver` built from a config, the base of the
differential, Pinocchio, Pink and neural solvers (the EmbodiChain solver interface: ``Solver(cfg, device)``).

The config's model, chain, TCP, weights and limits (:class:`~so101_mjx.ik.solvers.chain_config.ChainCfg`)
become the FK / Jacobian / TCP / limits / iteration-parameter surface of :class:`SO101Solver`,
which these solvers share; each solves IK its own way.
"""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp

from so101_mjx.errors import InputError
from so101_mjx.ik.solvers.chain_config import solver_arguments
from so101_mjx.ik.solvers.solver import SO101Solver


class CfgSolver(SO101Solver):
    """:class:`SO101Solver`'s surface built from ``cfg``, an instance of the class's ``cfg_class``.

    Args:
        cfg: the solver's config (None = its defaults); a validated copy is kept as ``self.cfg``.
        device: JAX device or platform string (:func:`~so101_mjx.ik.solvers.config.resolve_device`).
        **kwargs: further :class:`SO101Solver` arguments, overriding the config's.

    ``self.model`` is the MuJoCo model the chain comes from.
    """

    cfg_class: type = type(None)  # a subclass names its config class

    def __init__(self, cfg=None, device=None, **kwargs):
        cfg = self.cfg_class() if cfg is None else cfg
        if not isinstance(cfg, self.cfg_class):
            raise InputError(f"cfg must be a {self.cfg_class.__name__}, got {type(cfg).__name__}")
        self.cfg = dataclasses.replace(cfg)  # validated again: the fields are assignable
        model, kwargs = solver_arguments(self.cfg, kwargs)
        super().__init__(model, device=device, **kwargs)
        self.model = model

    @property
    def joint_names(self) -> list[str]:
        """The solved joints, in order."""
        return list(self.kin.joints)

    def get_ik_batch(self, target_xpos, qpos_seed=None):
        """IK of (..., 4, 4) TCP poses through ``get_ik`` on the flattened batch: success (...) and
        joints (..., dof), no candidate axis (whatever shape the solver's ``get_ik`` returns).
        ``qpos_seed``: (dof,) or (..., dof); None = the solver's own default seed."""
        t = jnp.asarray(target_xpos)
        if t.ndim < 2 or t.shape[-2:] != (4, 4):
            raise InputError(f"target_xpos must have shape (..., 4, 4), got {t.shape}")
        batch = t.shape[:-2]
        seed = None if qpos_seed is None else jnp.broadcast_to(self._q(qpos_seed),
                                                               (*batch, self.dof)).reshape(-1, self.dof)
        ok, q = self.get_ik(t.reshape(-1, 4, 4), qpos_seed=seed)
        return jnp.reshape(ok, batch), jnp.reshape(q, (*batch, self.dof))
