"""``so101-mjx bench``: sizes are validated before anything runs, the cost analysis reports buffers,
and the prepared accelerator check (``bench device --smoke``) runs end to end at tiny sizes."""

import json

import jax
import jax.numpy as jnp
import pytest

from so101_mjx import _precision, cli
from so101_mjx.benchmarks import compile_cost, device, env, fk
from so101_mjx.envs import make

BAD_SIZES = [
    (["bench", "env", "--batch", "0"], "--batch"),  # was a segfault (rc 139) in mujoco.rollout with zero worlds
    (["bench", "env", "--batch", "4", "-2"], "--batch"),
    (["bench", "env", "--steps", "0"], "--steps"),
    (["bench", "env", "--repeats", "0"], "--repeats"),
    (["bench", "env", "--cost-batch", "0"], "--cost-batch"),
    (["bench", "ik", "--batch", "0"], "--batch"),
    (["bench", "ik", "--reference-targets", "0"], "--reference-targets"),
    (["bench", "fk", "--batch", "-1"], "--batch"),
    (["bench", "dynamics", "--batch", "0"], "--batch"),
    (["bench", "dynamics", "--samples", "0"], "--samples"),
    (["bench", "device", "--worlds", "0"], "--worlds"),
    (["bench", "device", "--steps", "0"], "--steps"),
    (["bench", "device", "--budget-s", "0"], "--budget-s"),
    (["bench", "train", "--epochs", "0"], "--epochs"),
    (["bench", "render", "--size", "0"], "--size"),
    (["bench", "render", "--batch", "0"], "--batch"),
    (["bench", "train", "--updates-per-epoch", "0"], "--updates-per-epoch"),
]


@pytest.mark.parametrize(("argv", "argument"), BAD_SIZES, ids=["_".join(a[0][1:]) for a in BAD_SIZES])
def test_bad_size_is_one_line_and_status_2(argv, argument, capsys):
    assert cli.main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "Traceback" not in captured.err
    last = captured.err.strip().splitlines()[-1]
    assert last.startswith(f"so101-mjx bench {argv[1]}: error: argument {argument}: ") and ">" in last


def test_compile_cost_scales_with_batch_and_runs_nothing():
    calls = []

    def f(x):
        calls.append(1)  # traced once per lowering, never executed
        return jnp.sin(x) @ x.T

    small = compile_cost(f, jax.ShapeDtypeStruct((8, 64), jnp.float32))[1]
    big = compile_cost(f, jax.ShapeDtypeStruct((64, 64), jnp.float32))[1]
    assert len(calls) == 2
    assert big["argument_bytes"] == 64 * 64 * 4 and small["argument_bytes"] == 8 * 64 * 4
    assert big["output_bytes"] == 64 * 64 * 4
    assert big["flops"] > 7 * small["flops"] > 0
    assert big["total_bytes"] >= big["argument_bytes"] + big["output_bytes"]


def test_env_cost_rows_report_per_world_buffers():
    e = make("SO101Reach-v0", backend="c")
    (row1, row8) = env.cost_rows(e, [1, 8])
    assert row1[0] == 1 and row8[0] == 8
    per_world_kib = row8[9]
    assert row8[8] > row1[8] > 0 and per_world_kib > 0  # total MiB grows with the batch
    assert int(row8[10].replace(",", "")) * per_world_kib * 1024 <= 16e9  # worlds that fit 16 GB


@pytest.mark.slow  # ~2 min on a 2-core CPU (MJX compiles)
def test_device_smoke_writes_every_section(tmp_path, capsys):
    """The whole accelerator check at tiny sizes on this machine's backend: every section ok."""
    out = tmp_path / "device"
    assert cli.main(["bench", "device", "--smoke", "--out", str(out)]) == 0
    result = json.loads((out / "device.json").read_text())
    assert {k: v["status"] for k, v in result["sections"].items()} == dict.fromkeys(device.DEADLINES, "ok")
    rows = result["sections"]["env"]["rows"]
    assert {(r["env"], r["status"]) for r in rows} == {(name, "ok") for name in device.ENVS}
    for r in rows:
        for policy in device.POLICIES:
            assert r[policy]["env_steps_per_s"] > 0
            assert r[policy]["physics_steps_per_s"] == pytest.approx(50 * r[policy]["env_steps_per_s"])
        assert r["first_jit_s"] > 0
    pix = result["sections"]["pixels"]["rows"]
    assert [r["status"] for r in pix] == ["ok"] and all(pix[0][p]["env_steps_per_s"] > 0 for p in device.POLICIES)
    assert result["sections"]["ik"]["rows"][0]["solves_per_s"] > 0
    assert set(result["sections"]["dynamics"]["evals_per_s"]) == set(device.SMOKE.dynamics_quantities)
    for run in ("reach_ppo", "pickcube_ppo"):
        section = result["sections"][run]
        assert section["steps_done"] == section["planned_steps"] > 0 and len(section["curve"]) >= 2
    md = (out / "device.md").read_text()
    assert "| SO101PickPlace-v0 |" in md and "| 64 |" in md and "Anchors:" in md
    # a second run into the same directory is refused before anything runs
    assert cli.main(["bench", "device", "--smoke", "--out", str(out)]) == 2
    assert "holds an earlier run" in capsys.readouterr().err


@pytest.mark.slow
def test_device_section_failure_is_recorded_and_the_rest_runs(tmp_path, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("no such device")

    monkeypatch.setattr(device, "env_section", broken)
    monkeypatch.setattr(device, "dynamics_section", lambda *a, **k: {"status": "skipped in this test"})
    monkeypatch.setattr(device, "ppo_run", lambda *a, **k: {"status": "skipped in this test"})
    out = tmp_path / "device"
    assert cli.main(["bench", "device", "--smoke", "--out", str(out)]) == 0
    sections = json.loads((out / "device.json").read_text())["sections"]
    assert sections["env"]["status"] == "failed: RuntimeError: no such device"
    assert sections["ik"]["status"] == "ok" and sections["ik"]["rows"][0]["solves_per_s"] > 0
    assert sections["reach_ppo"]["status"] == "skipped in this test"
    assert "env section: failed: RuntimeError" in (out / "device.md").read_text()


def ik_table(out: str) -> dict[tuple[str, int], dict[str, str]]:
    """``bench ik``'s table rows keyed by (solver, batch)."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.split()[:2] == ["solver", "batch"])
    header = lines[start].split()
    rows = [dict(zip(header, line.split())) for line in lines[start + 2:] if line.strip()]
    return {(r["solver"], int(r["batch"])): r for r in rows}


@pytest.mark.slow  # every solver compiled
def test_ik_bench_reports_every_solver_and_saves_the_learned_net(tmp_path, capsys):
    from so101_mjx.ik.solvers import learned_seeds as neural_ik

    path = tmp_path / "seed.npz"
    argv = ["bench", "ik", "--batch", "16", "--repeats", "1", "--reference-targets", "2",
            "--learned-steps", "30", "--save-learned", str(path)]
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    assert "learned seed net: trained in-run, 30 steps" in out and f"written to {path}" in out
    rows = ik_table(out)
    assert set(rows) == {(s, 16) for s in ("lm", "analytic", "learned")}
    for r in rows.values():
        assert float(r["solves/s"]) > 0 and 0 <= float(r["success<1mm"]) <= 1 and float(r["ratio"]) > 0
    # The closed form solves the (position, pitch) targets it can reach exactly; LM from HOME, few.
    assert float(rows["analytic", 16]["success<1mm"]) >= 0.75 and float(rows["analytic", 16]["err_p50_m"]) < 1e-6
    assert float(rows["lm", 16]["success<1mm"]) < float(rows["analytic", 16]["success<1mm"])
    net = neural_ik.load(path)
    assert net.hidden == neural_ik.HIDDEN and net.heads == neural_ik.HEADS


def test_ik_bench_learned_arguments(tmp_path, capsys):
    assert cli.main(["bench", "ik", "--learned-steps", "0"]) == 2
    assert "argument --learned-steps" in capsys.readouterr().err
    assert cli.main(["bench", "ik", "--batch", "1", "--learned", str(tmp_path / "missing.npz")]) == 2
    captured = capsys.readouterr()
    assert "missing.npz" in captured.err and "Traceback" not in captured.err
    assert cli.main(["bench", "ik", "--save-learned", str(tmp_path)]) == 2
    assert "argument --save-learned" in capsys.readouterr().err


@pytest.mark.slow
def test_env_bench_times_both_c_loops_against_both_raw_baselines(capsys):
    """One row per backend c host loop; rates positive, ratios as the table defines them."""
    assert cli.main(["bench", "env", "--env", "SO101Reach-v0", "--batch", "4", "--steps", "1", "--repeats", "3",
                     "--no-reference"]) == 0
    rows = [line.split() for line in capsys.readouterr().out.strip().splitlines()[-2:]]
    assert [row[1] for row in rows] == ["batch", "pool"]
    for row in rows:
        rate, physics, raw_rollout, raw_batch, vs_rollout, vs_batch = (float(x) for x in row[2:8])
        assert (min(rate, raw_rollout, raw_batch, vs_rollout, vs_batch) > 0
                and physics == pytest.approx(rate * 50, rel=3e-3))
    assert cli.main(["bench", "env", "--env", "SO101Reach-v0", "--batch", "2", "--steps", "1", "--repeats", "1",
                     "--no-reference", "--loop", "pool"]) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1].split()[:2] == ["2", "pool"]


@pytest.mark.slow  # PPO epochs compiled
def test_train_bench_reports_the_ppo_rate_against_the_raw_env(capsys):
    """The tiny preset end to end: three positive rates and their ratios in one table row."""
    jax.config.update("jax_enable_x64", False)  # training runs in float32, the library default
    try:
        assert cli.main(["bench", "train", "--env", "SO101Reach-v0", "--preset", "tiny", "--epochs", "2",
                         "--updates-per-epoch", "1", "--repeats", "1"]) == 0
    finally:
        jax.config.update("jax_enable_x64", True)
    out = capsys.readouterr().out.strip().splitlines()
    assert out[0].startswith("SO101Reach-v0 preset tiny, backend c, 8 worlds") and "2 epochs of 1 updates" in out[0]
    raw, collect, ppo, collect_ratio, ppo_ratio = (float(x) for x in out[-1].split())
    assert min(raw, collect, ppo) > 0
    # 4 digits printed
    assert collect_ratio == pytest.approx(collect / raw, rel=3e-3) and ppo_ratio == pytest.approx(ppo / raw, rel=3e-3)


@pytest.mark.slow  # render workers and pixel envs
def test_render_bench_reports_frames_and_env_rates(capsys):
    assert cli.main(["bench", "render", "--size", "16", "--batch", "1", "3", "--repeats", "1", "--env-batch", "2"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    frames = [line.split() for line in lines[3:5]]
    assert [(int(r[0]), int(r[1])) for r in frames] == [(16, 1), (16, 3)]
    assert all(float(r[2]) > 0 and float(r[3]) > 0
               and float(r[4]) == pytest.approx(float(r[2]) / float(r[3]), rel=3e-3) for r in frames)
    assert all(float(r[5]) > 0 and float(r[6]) == pytest.approx(float(r[2]) / float(r[5]), rel=3e-3) for r in frames)
    size, worlds, pix, plain, ratio = lines[-1].split()
    assert ((int(size), int(worlds)) == (16, 2) and float(pix) > 0
            and float(ratio) == pytest.approx(float(pix) / float(plain), rel=3e-3))


@pytest.mark.slow  # two vector envs compiled and stepped
@pytest.mark.parametrize("pixels", [[], ["--image-size", "16", "--image-cameras", "front,wrist", "--image-quality",
                                          "fast"]], ids=["state", "pixels"])
def test_vector_bench_reports_both_vector_envs_and_their_ratio(capsys, pixels):
    assert cli.main(["bench", "vector", "--batch", "2", "--steps", "3", "--repeats", "1", *pixels]) == 0
    out = capsys.readouterr().out
    assert ("pixels.front+wrist 16x16 fast observations" in out) == bool(pixels)
    worlds, ours, sync, ratio = out.strip().splitlines()[-1].split()
    assert int(worlds) == 2 and float(ours) > 0 and float(sync) > 0
    assert float(ratio) == pytest.approx(float(ours) / float(sync), rel=3e-3)


@pytest.mark.slow
def test_timestep_study_compares_each_step_with_the_baseline(capsys, monkeypatch):
    """The baseline row deviates from itself by nothing; a 5 ms step deviates, with 20 substeps per
    control period, and the command prints one row per step."""
    from so101_mjx.benchmarks import timestep

    rows = timestep.study("SO101Reach-v0", [0.002, 0.005], episodes=2)
    base, coarse = rows
    assert (base["substeps"], coarse["substeps"]) == (50, 20) and base["speedup"] == 1.0
    assert base["arm_1_step"] == base["arm_episode"] == base["objects_episode"] == 0.0
    assert 0 < coarse["arm_1_step"] <= coarse["arm_episode"] < 0.1 and coarse["speedup"] > 0
    monkeypatch.setattr(timestep, "study", lambda *args: rows)  # the command's table, without running it again
    assert cli.main(["bench", "timestep", "--env", "SO101Reach-v0", "--physics-dt", "0.002", "0.005"]) == 0
    assert capsys.readouterr().out.count("SO101Reach-v0") == 2


def test_a_float64_bench_leaves_the_callers_precision(capsys):
    """``bench(..., x64=True)`` runs in float64 and hands the caller back its own setting (here float32)."""
    with _precision.x64(False):
        fk.bench([8], 1, x64=True)
        assert not jax.config.jax_enable_x64
    assert jax.config.jax_enable_x64  # the suite's float64, restored by the block
    assert ", float64;" in capsys.readouterr().out

