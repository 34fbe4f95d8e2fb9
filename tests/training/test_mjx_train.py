"""The MJX PPO path end to end: train the tiny Reach preset on backend ``mjx`` (float32), checkpoint,
export, evaluate the checkpoint on ``mjx`` and the ONNX on ``c``, and replay it on CPU MuJoCo.

Reach is the cheapest scene (no block); the tiny preset's 8-step episodes keep Brax's training and
eval unrolls short, so the cost is the MJX compiles (train step, Brax eval, our eval).
"""

from pathlib import Path

import jax
import numpy as np
import pytest
from conftest import train_tiny

from so101_mjx import cli
from so101_mjx.training import checkpoint, presets
from so101_mjx.training.evaluate import evaluate
from so101_mjx.training.progress import read_csv

# ~3.5 min of MJX compiles on a 2-core CPU; run with -m soak (and in so101-mjx bench device)
pytestmark = pytest.mark.soak

ENV = "SO101Reach-v0"
pytest.importorskip("onnx")


@pytest.fixture(scope="module")
def mjx_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("mjx_train") / "run"
    train_tiny(out, "--env", ENV, "--backend", "mjx", "--seed", "2")
    return out


def test_mjx_ppo_trains_and_checkpoints(mjx_run):
    preset = presets.preset(ENV, "tiny")
    saved = checkpoint.steps(mjx_run)
    assert [int(p.name) for p in saved] == [k * preset.steps_per_epoch for k in range(1, preset.num_evals)]
    run = checkpoint.read_run(saved[-1])
    assert (run["backend"], run["env"], run["step"]) == ("mjx", ENV, preset.total_steps)
    rows = read_csv(mjx_run / "metrics.csv")
    assert len(rows) == preset.num_evals and all(np.isfinite(r["eval_reward"]) for r in rows)
    first, last = (jax.tree.leaves(checkpoint.load(p)[1][1]) for p in (saved[0], saved[-1]))
    assert any(not np.array_equal(a, b) for a, b in zip(first, last))  # PPO updated the policy


def test_mjx_checkpoint_and_its_onnx_agree_across_backends(mjx_run, capsys):
    """The checkpoint in MJX and the exported ONNX on MuJoCo C (float64): the same episodes."""
    on_mjx = evaluate(mjx_run, backends=("mjx",), episodes=2, x64=True)["backends"]["mjx"]
    on_c = evaluate(mjx_run / "policy.onnx", backends=("c",), episodes=2, x64=True)["backends"]["c"]
    assert on_mjx["success"] == on_c["success"] and on_mjx["length"] == on_c["length"] == [8, 8]
    np.testing.assert_allclose(on_mjx["returns"], on_c["returns"], rtol=1e-9, atol=1e-9)
    assert cli.main(["replay", str(mjx_run / "policy.onnx"), "--episodes", "2"]) == 0
    assert "success rate" in capsys.readouterr().out
