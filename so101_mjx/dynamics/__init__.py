"""Rigid-body dynamics: the ``DynamicsBackend`` interface, its JAX, MuJoCo C and Pinocchio backends, identification.

``from so101_mjx.dynamics import JaxBackend`` keeps working: the package re-exports
:mod:`so101_mjx.dynamics.backend`'s names. Importing it does not import Pinocchio (the
``pinocchio`` extra): :class:`PinocchioBackend` imports it when one is built.
"""

from so101_mjx.dynamics.backend import BodyInertia, ChainBackend, DynamicsBackend, JaxBackend, ModelLoadError
from so101_mjx.dynamics.pinocchio_backend import PinocchioBackend

__all__ = ["BodyInertia", "ChainBackend", "DynamicsBackend", "JaxBackend", "ModelLoadError", "PinocchioBackend"]
