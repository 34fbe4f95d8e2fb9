"""Training sizes past what the student's convolutions, a jitted loop or the machine's memory take are
one InputError naming them, raised before anything is built or written."""

import dataclasses

import pytest

from so101_mjx import _checks as checks
from so101_mjx.errors import InputError
from so101_mjx.training import distill, pixel_policy, presets
from so101_mjx.training.distill import DistillConfig
from so101_mjx.training.pixel_policy import PixelStudent, Spec


def test_preset_refuses_an_epoch_longer_than_a_jitted_loop():
    tiny = presets.preset("SO101Reach-v0", "tiny")
    per_update = tiny.batch_size * tiny.num_minibatches * tiny.unroll_length
    longest = dataclasses.replace(tiny, num_timesteps=(2**31 - 1) * per_update * (tiny.num_evals - 1))
    assert longest.steps_per_epoch == (2**31 - 1) * per_update
    with pytest.raises(InputError,
                       match=r"^num_timesteps 100000000000000000000 over 2 epochs makes .* training steps per epoch"):
        dataclasses.replace(tiny, num_timesteps=10**20)


def test_distill_refuses_frames_smaller_than_the_students_convolutions_take():
    student, least = PixelStudent(), pixel_policy.MIN_IMAGE_SIZE
    distill.check_sizes(DistillConfig(), Spec(least), student)
    with pytest.raises(InputError, match=f"image_size must be >= {least} px"):
        distill.check_sizes(DistillConfig(), Spec(least - 1), student)


@pytest.mark.parametrize(("config", "option"), [
    (DistillConfig(iterations=10**6), "iterations 1000000 x episodes 64 x steps 40"),
    (DistillConfig(iterations=1, episodes=10**6), "iterations 1 x episodes 1000000 x steps 40"),
    (DistillConfig(batch_size=10**7), "batch_size 10000000"),
])
def test_distill_refuses_sizes_past_the_machines_memory(config, option, monkeypatch):
    monkeypatch.setattr(checks, "host_memory", lambda: 16 * 2**30)
    distill.check_sizes(DistillConfig(), Spec(64), PixelStudent())  # the defaults fit 16 GiB
    with pytest.raises(InputError, match=f"^{option} needs about .* GiB .*; this machine has 16.0 GiB of RAM"):
        distill.check_sizes(config, Spec(64), PixelStudent())
