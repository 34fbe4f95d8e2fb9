"""A scene file MuJoCo cannot compile is one InputError line naming it (not MuJoCo's multi-line ValueError)."""

from __future__ import annotations

import pytest

from so101_mjx.errors import InputError
from so101_mjx.robot.scenes import load_model


@pytest.mark.parametrize(("text", "message"), [
    ("<mujoco><worldbody>", "XML parse error"),
    ('<mujoco><worldbody><geom type="box" size="a"/></worldbody></mujoco>', "bad format in attribute 'size'"),
])
def test_a_broken_scene_file_is_one_line(tmp_path, text, message):
    (tmp_path / "scene.xml").write_text(text)
    with pytest.raises(InputError, match="scene.xml: MuJoCo cannot compile it") as err:
        load_model(tmp_path / "scene.xml")
    assert message in str(err.value) and len(str(err.value).splitlines()) == 1
