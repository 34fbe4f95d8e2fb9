"""The policies shipped with the package (``pretrained:<task>``): each loads as its task's policy, succeeds
in that task, and an unknown name is one line naming what exists."""

from __future__ import annotations

import json

import pytest

from so101_mjx.errors import InputError
from so101_mjx.training import evaluate, policies

SHIPPED = policies.shipped()


def test_there_are_pretrained_policies():
    assert "SO101PickCube-v0" in SHIPPED


@pytest.mark.parametrize("task", SHIPPED)
def test_a_pretrained_policy_is_its_tasks_and_succeeds(task):
    policy = policies.load(f"pretrained:{task}")
    assert policy.env == task and not policy.pixel
    run = json.loads((policies.pretrained_dir() / task / "run.json").read_text())
    assert run["env"] == task and run["preset"] and run["success"] >= 0.9  # what the shipped run measured
    result = evaluate.evaluate(f"pretrained:{task}", episodes=16, seed=11)["backends"]["c"]
    assert result["success_rate"] >= 0.8, result["success_rate"]


def test_an_unknown_pretrained_name_names_what_exists():
    with pytest.raises(InputError, match=r"no pretrained policy for 'SO101Nope-v0'; pretrained:<task> exists for \["):
        policies.load("pretrained:SO101Nope-v0")
