"""The finger collision-primitive study (so101_mjx.validation.collision_study): fitted variants and the MJX vs C contact
comparison."""

import mujoco
import numpy as np
import pytest

from so101_mjx.ik.iterative import grasp_point_offset
from so101_mjx.robot.scenes import JAW_PADS, load_model
from so101_mjx.validation import collision_study as cs


def _box_frame(model: mujoco.MjModel, data: mujoco.MjData, name: str):
    g = model.geom(name).id
    return model.geom_size[g].copy(), data.geom_xpos[g].copy(), data.geom_xmat[g].reshape(3, 3).copy()


def _forwarded(variant: str):
    """Today's boxes and ``variant``, each with an MjData after mj_forward at qpos0."""
    models = load_model(cs.SCENE, jaw_pads=True), cs.variant_model(variant)
    datas = tuple(mujoco.MjData(m) for m in models)
    for m, d in zip(models, datas):
        mujoco.mj_forward(m, d)
    return (*models, *datas)


def test_capsule_pads_are_inscribed_in_todays_pad_boxes():
    boxes, capsules, d_box, d_cap = _forwarded("capsule pads")
    for name in JAW_PADS:
        size, centre, rot = _box_frame(boxes, d_box, name)
        g = capsules.geom(name).id
        assert capsules.geom_type[g] == mujoco.mjtGeom.mjGEOM_CAPSULE
        assert capsules.geom_contype[g] == boxes.geom_contype[boxes.geom(name).id] and capsules.geom_conaffinity[g] > 0
        np.testing.assert_allclose(d_cap.geom_xpos[g], centre, atol=1e-12)
        axis = d_cap.geom_xmat[g].reshape(3, 3)[:, 2]
        np.testing.assert_allclose(np.abs(rot.T @ axis), np.eye(3)[np.argmax(size)], atol=1e-9)  # along the long side
        r, half = capsules.geom_size[g, :2]
        assert r == pytest.approx(size.min())  # the surface reaches the pad face, normal to the thin side
        assert half + r == pytest.approx(size.max())  # the ends stay inside the box
    np.testing.assert_allclose(grasp_point_offset(capsules), grasp_point_offset(boxes), atol=1e-12)


def test_sphere_pads_line_the_pad_axis_and_collide():
    boxes, spheres, d_box, d_sph = _forwarded("3-sphere pads")
    for name in JAW_PADS:
        size, centre, rot = _box_frame(boxes, d_box, name)
        ids = [spheres.geom(n).id for n in (name, f"{name}_1", f"{name}_2")]
        assert ((spheres.geom_type[ids] == mujoco.mjtGeom.mjGEOM_SPHERE).all()
                and (spheres.geom_conaffinity[ids] == 5).all())
        local = (d_sph.geom_xpos[ids] - centre) @ rot  # in the box frame
        np.testing.assert_allclose(local[0], 0, atol=1e-12)
        long = np.argmax(size)
        np.testing.assert_allclose(np.abs(local[1:, long]) + spheres.geom_size[ids[1:], 0], size[long], atol=1e-12)
        np.testing.assert_allclose(np.delete(local, long, axis=1), 0, atol=1e-12)


def test_bad_variant_and_fit_raise():
    with pytest.raises(ValueError, match="variant must be one of"):
        cs.variant_model("cylinders")
    with pytest.raises(ValueError, match="Fit.count must be odd"):
        cs.Fit("sphere", 2)
    with pytest.raises(ValueError, match="Fit.shape"):
        cs.Fit("cylinder")


@pytest.mark.slow  # MJX contacts of two scenes
@pytest.mark.parametrize("variant, pair", [("boxes (today)", "box–box"), ("capsule pads", "capsule–box")])
def test_contact_comparison_at_two_grasp_states(variant, pair):
    model = cs.variant_model(variant)
    phys, ctrls = cs.grasp_states(cs.make_env(model, "c"), 2)
    assert phys.qpos.shape[0] == 3 and ctrls.shape[0] == 2
    c, m = cs.c_contacts(model, phys.qpos[:-1]), cs.mjx_contacts(model, phys.qpos[:-1])
    for side in (c, m):
        assert all(np.isfinite(s["dist"]).all() and (s["dist"] > -0.005).all() for s in side)  # finite, under 5 mm deep
    rows = cs.compare_contacts(model, c, m)
    assert pair in rows
    row = rows[pair]
    assert row["c"] > 0 and row["mjx"] > 0
    assert row["c"] > row["unmatched"]  # some C contact was matched, so the errors below were computed
    assert all(np.isfinite(row[k]) and row[k] >= 0 for k in ("dist", "pos", "angle"))
    assert all("block" in g for g in row["geoms"])
    if variant == "capsule pads":  # the pads are capsules: no pad is left in a box–box pair
        assert not any(pad in g for g in rows.get("box–box", {"geoms": []})["geoms"] for pad in JAW_PADS)
    else:
        assert "capsule–box" not in rows
