"""Rigid-body dynamics: the ``DynamicsBackend`` interface, its JAX and MuJoCo C backends, identification.

``from so101_mjx.dynamics import JaxBackend`` keeps working: the package re-exports
:mod:`so101_mjx.dynamics.backend`'s names.
"""

from so101_mjx.dynamics.backend import DynamicsBackend, JaxBackend

__all__ = ["DynamicsBackend", "JaxBackend"]
