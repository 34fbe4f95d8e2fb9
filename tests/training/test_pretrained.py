"""The policies shipped with the package (``pretrained:<task>[/<variant>]``): each loads as its task's policy
under its env variant, succeeds in that task, and an unknown name is one line naming what exists."""

from __future__ import annotations

import json

import pytest

from so101_mjx.errors import InputError
from so101_mjx.training import evaluate, policies, presets, replay

SHIPPED = policies.shipped()
CAMERA = "SO101PickCube-v0/camera"  # the camera student: observes the front camera's frames, not the block


def test_there_are_pretrained_policies_and_variants_by_task_and_name():
    assert {"SO101PickCube-v0", "SO101PickCube-v0/joint", CAMERA, "SO101Reach-v0"} <= set(SHIPPED)
    variant = policies.pretrained_dir() / "SO101PickCube-v0" / "joint"
    assert policies.pretrained("so101_mjx/SO101PickCube-v0/joint").parent == variant  # the namespaced name too


def test_replay_names_a_pretrained_policy_as_given(capsys):
    replay.replay("pretrained:SO101PickCube-v0/joint", episodes=1)
    assert "replay pretrained:SO101PickCube-v0/joint on so101_mjx/SO101PickCube-v0 " in capsys.readouterr().out


@pytest.mark.parametrize("name", [name for name in SHIPPED if name != CAMERA])
def test_a_pretrained_policy_is_its_tasks_and_succeeds(name):
    task, _, variant = name.partition("/")
    policy = policies.load(f"pretrained:{name}")
    assert policy.env == task and not policy.pixel
    run = json.loads((policies.pretrained_dir() / name / "run.json").read_text())
    assert run["env"] == task and run["preset"] and run["success"] >= 0.9  # what the shipped run measured
    if variant:  # trained under that env variant, which the policy's env config holds
        assert run["env_variant"] == variant
        expected = presets.variant(task, variant).config
        assert {key: policy.env_config[key] for key in expected} == expected
    result = evaluate.evaluate(f"pretrained:{name}", episodes=16, seed=11)["backends"]["c"]
    assert result["success_rate"] >= 0.8, result["success_rate"]


@pytest.mark.slow  # renders every step's frame
def test_the_pretrained_camera_student_sees_only_frames_and_the_arm_and_succeeds():
    policy = policies.load(f"pretrained:{CAMERA}")
    assert policy.pixel and policy.env == "SO101PickCube-v0" and policy.cameras == ("front",)
    assert policy.source == policies.pretrained_dir() / CAMERA / "student.npz"
    run = json.loads((policies.pretrained_dir() / CAMERA / "run.json").read_text())
    assert run["kind"] == "pixel" and run["teacher"] == "pretrained:SO101PickCube-v0" and run["success"] >= 0.9
    result = evaluate.evaluate(f"pretrained:{CAMERA}", episodes=8, seed=11)["backends"]["c"]
    assert result["success_rate"] >= 0.75, result["success_rate"]


def test_an_unknown_pretrained_name_names_what_exists():
    with pytest.raises(InputError, match=r"no pretrained policy for 'SO101Nope-v0'; pretrained:<name> exists for \["):
        policies.load("pretrained:SO101Nope-v0")
