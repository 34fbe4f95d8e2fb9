"""The dynamics backends' interface (seed 004) as client code uses it: FIGAROH-style calls, the
interface's optional methods, and the exceptions when the simulator is missing."""

import subprocess
import sys

import numpy as np
import pytest

from so101_mjx.dynamics import DynamicsBackend, JaxBackend, PinocchioBackend
from so101_mjx.dynamics.identify import nonzero_inertia_columns
from so101_mjx.dynamics.mujoco_backend import MuJoCoBackend, MujocoBackend
from so101_mjx.robot.scenes import scene_path, scenes_dir

MODEL_PATHS = [str(scene_path("so101"))] + [str(p) for p in sorted(scenes_dir().glob("so101*.urdf"))[:1]]


def _client(backend: DynamicsBackend) -> dict:
    """What FIGAROH's identification and calibration code calls on a backend (seed 004)."""
    with backend as b:
        q = np.array([0.1, -0.4, 0.5, 0.2, -0.3, 0.6])
        v, a = np.linspace(-1, 1, b.nv), np.linspace(2, -2, b.nv)
        fk = b.compute_forward_kinematics(q)
        frame = "gripperframe"
        w = np.asarray(b.compute_regressor(q, v, a))
        nonzero = [i for i, inertia in enumerate(b.get_inertias()) if inertia.mass != 0]  # FIGAROH's RegressorBuilder
        return {
            "sizes": (b.nq, b.nv, b.model_format, b.model_path),
            "M": b.compute_mass_matrix(q), "C": b.compute_coriolis_matrix(q, v), "g": b.compute_gravity_vector(q),
            "tau": b.compute_inverse_dynamics(q, v, a), "W": w[:, nonzero_inertia_columns(b)], "nonzero": nonzero,
            "a": b.compute_forward_dynamics(q, v, b.compute_inverse_dynamics(q, v, a)),
            "fk": {k: fk[frame][k] for k in ("position", "orientation", "transformation")},
            "J": b.compute_jacobian(q, frame), "frame_id": b.get_frame_id(frame),
            "joints": b.get_joint_names(), "frames": b.get_frame_names(),
            "diff": b.compute_difference(q, b.compute_integrate(q, v)), "model": b.get_model_object(),
        }  # fmt: skip


@pytest.mark.parametrize("model_path", MODEL_PATHS, ids=lambda p: p.rsplit("/", 1)[-1])
def test_client_calls_run_unchanged(model_path):
    """Seed 004: ``backend = PinocchioBackend(model_path=...)``, ``MuJoCoBackend(model_path=...)``, then
    the interface's calls; the two backends give the same dynamics of the same file."""
    pytest.importorskip("pinocchio")
    p, m = _client(PinocchioBackend(model_path=model_path)), _client(MuJoCoBackend(model_path=model_path))
    fmt = "urdf" if model_path.endswith(".urdf") else "mjcf"
    assert p["sizes"] == m["sizes"] == (6, 6, fmt, model_path)
    for key in ("M", "C", "g", "tau", "a"):
        np.testing.assert_allclose(p[key], m[key], rtol=0, atol=1e-9, err_msg=key)
    np.testing.assert_allclose(p["a"], np.linspace(2, -2, 6), rtol=0, atol=1e-9)
    # Massless bodies (a URDF's sites, imported by MuJoCo as bodies) are filtered out of the regressor.
    np.testing.assert_allclose(p["W"], m["W"], rtol=0, atol=1e-9)
    assert p["W"].shape == (6, 60)
    assert p["joints"] == m["joints"] and "gripperframe" in p["frames"] and "gripperframe" in m["frames"]
    for key in ("position", "orientation", "transformation"):
        np.testing.assert_allclose(p["fk"][key], m["fk"][key], rtol=0, atol=1e-12)
    rot = m["fk"]["orientation"]  # Pinocchio's Jacobian is LOCAL, the MuJoCo backend's world-aligned
    np.testing.assert_allclose(p["J"], np.r_[rot.T @ m["J"][:3], rot.T @ m["J"][3:]], rtol=0, atol=1e-12)
    np.testing.assert_allclose(p["diff"], np.linspace(-1, 1, 6), rtol=0, atol=1e-15)
    assert p["nonzero"] == list(range(7)) and len(m["nonzero"]) == 6  # Pinocchio's list starts with the universe
    assert type(p["model"]).__name__ == "Model" and type(m["model"]).__name__ == "MjModel"


def test_interface_defaults():
    """Seed 004, DynamicsBackend: the optional methods raise NotImplementedError naming the backend;
    model_path and config are kept; the backend is a context manager."""

    class Minimal(DynamicsBackend):
        nq = nv = property(lambda self: 1)
        model_format = property(lambda self: "urdf")
        compute_mass_matrix = compute_coriolis_matrix = compute_gravity_vector = compute_bias = lambda self, *x: None
        compute_forward_kinematics = compute_jacobian = compute_regressor = lambda self, *x: None
        compute_inverse_dynamics = compute_forward_dynamics = lambda self, *x: None

    with Minimal("robot.urdf", verbose=True) as b:
        assert (b.model_path, b.config) == ("robot.urdf", {"verbose": True})
        calls = {"dynamics derivatives": lambda: b.compute_dynamics_derivatives(0, 0),
                 "get_joint_names": b.get_joint_names, "get_frame_names": b.get_frame_names,
                 "get_inertias": b.get_inertias, "get_frame_id": lambda: b.get_frame_id("x"),
                 "compute_difference": lambda: b.compute_difference(0, 0),
                 "compute_integrate": lambda: b.compute_integrate(0, 0),
                 "random_configuration": b.random_configuration, "get_model_object": b.get_model_object}  # fmt: skip
        for name, call in calls.items():
            with pytest.raises(NotImplementedError, match=f"^Minimal does not implement {name}$"):
                call()
    with pytest.raises(TypeError, match="abstract"):
        type("Incomplete", (DynamicsBackend,), {})(None)
    assert MuJoCoBackend is MujocoBackend and issubclass(PinocchioBackend, DynamicsBackend)
    assert JaxBackend("so101").get_inertias()[0].mass == pytest.approx(0.100006)


def test_import_error_names_the_extra(monkeypatch):
    """Seed 004, PinocchioBackend and from_model: ImportError when Pinocchio is not installed."""
    monkeypatch.setitem(sys.modules, "pinocchio", None)  # what a missing package looks like to `import`
    with pytest.raises(ImportError,
                       match=r'Pinocchio is not installed\. Install with: pip install "so101-mjx\[pinocchio\]"'):
        PinocchioBackend()
    with pytest.raises(ImportError, match="Pinocchio is not installed"):
        PinocchioBackend.from_model(object())


def test_dynamics_imports_without_pinocchio():
    """``import so101_mjx.dynamics`` neither needs nor imports Pinocchio (an extra)."""
    code = ("import sys; sys.modules['pinocchio'] = None; import so101_mjx.dynamics as d; "
            "assert d.PinocchioBackend.__name__ == 'PinocchioBackend'; print('ok')")  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
