"""The solver interface's config objects (seed 002, ``SolverCfg`` / ``PytorchSolverCfg``): fields and
defaults, ``from_dict``, ``init_solver`` and ``Solver(cfg, device)`` with a JAX device."""

from dataclasses import dataclass

import jax
import numpy as np
import pytest

from so101_mjx.errors import InputError
from so101_mjx.ik import (
    AnalyticSolverCfg,
    PytorchSolver,
    PytorchSolverCfg,
    SO101AnalyticSolver,
    SO101SolverCfg,
    SolverCfg,
)
from so101_mjx.ik.solvers.config import resolve_device
from so101_mjx.robot.scenes import ARM_JOINTS


def test_base_fields_and_defaults():
    """Seed 002, SolverCfg attributes: class_type, urdf_path, joint_names (None = all), root/end link, tcp,
    ik_nearest_weight, user_qpos_limits."""
    cfg = SolverCfg()
    assert ((cfg.class_type, cfg.urdf_path, cfg.joint_names, cfg.root_link_name, cfg.end_link_name)
            == ("", None, None, "base", "gripperframe"))
    np.testing.assert_array_equal(cfg.tcp, np.eye(4))
    assert cfg.ik_nearest_weight is None and cfg.user_qpos_limits is None
    assert SO101SolverCfg is PytorchSolverCfg and PytorchSolverCfg().class_type == "PytorchSolver"


@pytest.mark.parametrize("field, value, match", [
    ("tcp", np.diag([2.0, 1, 1, 1]), "tcp must be a finite"),
    ("joint_names", "shoulder_pan", "joint_names"),
    ("ik_nearest_weight", [1.0, -1.0], "ik_nearest_weight"),
    ("user_qpos_limits", [[1.0, 0.0], [0.0, 0.0]], "user_qpos_limits"),
    ("end_link_name", "", "end_link_name"),
    ("max_iterations", 0, "max_iterations"),
    ("damp", -1e-3, "damp"),
    ("ik_solution_selection", "best", "ik_solution_selection"),
])
def test_bad_fields_name_the_field(field, value, match):
    """Bad values are InputErrors naming the field (seed 002, SolverCfg; the project's input rule)."""
    with pytest.raises(InputError, match=match):
        PytorchSolverCfg(**{field: value})


def test_from_dict_picks_concrete_config_and_warns_on_unknown():
    """Seed 002, SolverCfg.from_dict: the concrete config by class_type, fields to the constructor, unknown
    fields ignored with a warning."""
    with pytest.warns(UserWarning, match="unknown field 'colour' ignored"):
        cfg = SolverCfg.from_dict({"class_type": "PytorchSolver", "max_iterations": 12, "damp": 0.0, "colour": "red"})
    assert type(cfg) is PytorchSolverCfg and cfg.max_iterations == 12 and cfg.damp == 0.0
    assert not hasattr(cfg, "colour")
    assert type(SolverCfg.from_dict({"class_type": "SO101AnalyticSolver", "pitch": 1.0})) is AnalyticSolverCfg
    assert type(PytorchSolverCfg.from_dict({"pos_eps": 1e-4})) is PytorchSolverCfg  # no class_type: the called class
    with pytest.raises(InputError, match="class_type must be one of"):
        SolverCfg.from_dict({"class_type": "NoSuchSolver"})
    with pytest.raises(InputError, match="max_iterations"):  # __post_init__ sees the dict's values
        SolverCfg.from_dict({"class_type": "PytorchSolver", "max_iterations": -1})


def test_from_dict_legacy_attribute_applied_after_init():
    """Seed 002, SolverCfg.from_dict: legacy unannotated config attributes are set after construction."""

    @dataclass
    class LegacyCfg(PytorchSolverCfg):
        class_type: str = "LegacyTestSolver"
        legacy_gain = 1.0  # unannotated: not a dataclass field

    cfg = SolverCfg.from_dict({"class_type": "LegacyTestSolver", "legacy_gain": 3.0})
    assert type(cfg) is LegacyCfg and cfg.legacy_gain == 3.0 and LegacyCfg.legacy_gain == 1.0


def test_init_solver_and_constructor_with_device():
    """Seed 002, PytorchSolverCfg.init_solver (CPU by default) and PytorchSolver(cfg, device): the device is
    a JAX device (or platform string), used for the solver's arrays; config values reach the solver."""
    cpu = jax.devices("cpu")[0]
    cfg = PytorchSolverCfg(max_iterations=7, damp=0.0, ik_nearest_weight=[1, 2, 3, 4, 5],
                           ik_solution_selection="manipulability")
    solver = cfg.init_solver()
    assert isinstance(solver, PytorchSolver) and solver.device == cpu and solver.cfg is cfg
    assert solver.get_iteration_params()["max_iterations"] == 7 and solver.selection == "manipulability"
    np.testing.assert_array_equal(solver.get_ik_nearest_weight(), [1, 2, 3, 4, 5])
    assert solver.kin.joints == ARM_JOINTS  # joint_names None: every hinge from the root to the end link
    same = PytorchSolver(cfg, cpu)
    assert same.get_fk(np.zeros(5)).devices() == {cpu}
    assert PytorchSolver(cfg, "cpu").device == cpu and resolve_device(None) == jax.devices()[0]
    with pytest.raises(InputError, match="device"):
        PytorchSolver(cfg, "nosuchplatform")
    with pytest.raises(InputError, match="cfg must be a PytorchSolverCfg"):
        PytorchSolver(AnalyticSolverCfg())
    with pytest.raises(InputError, match="builds no solver"):
        SolverCfg().init_solver()


def test_joint_names_limits_and_links():
    """Seed 002, SolverCfg.joint_names / user_qpos_limits / root_link_name: a subset chain, intersected limits,
    and a root link that is not at the world origin refused (FK is in the root's frame)."""
    lo = [-1.0, -1.0, -1.0, -1.0, -1.0]
    solver = PytorchSolverCfg(user_qpos_limits=[lo, [5.0] * 5]).init_solver()
    limits = solver.get_qpos_limits()
    assert limits["lower_qpos_limits"] == lo and limits["upper_qpos_limits"][0] == pytest.approx(1.9198621771937634)
    sub = PytorchSolverCfg(joint_names=list(ARM_JOINTS[:4])).init_solver()
    assert sub.dof == 4
    # any link, not one a joint moves
    with pytest.raises(InputError, match="root_link_name 'shoulder' must be a link no joint moves"):
        PytorchSolverCfg(root_link_name="shoulder").init_solver()
    with pytest.raises(InputError, match="end_link_name 'nowhere'"):
        PytorchSolverCfg(end_link_name="nowhere").init_solver()


def test_analytic_config_builds_analytic_solver():
    """Seed 002, init_solver of each config: AnalyticSolverCfg builds SO101AnalyticSolver with its fields."""
    solver = AnalyticSolverCfg(pitch=1.2, ik_solution_selection="manipulability").init_solver()
    assert isinstance(solver, SO101AnalyticSolver) and solver.pitch == 1.2 and solver.selection == "manipulability"
    assert SO101AnalyticSolver(AnalyticSolverCfg(), "cpu").cfg is not None
