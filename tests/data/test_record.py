"""so101-mjx record: the LeRobotDataset v3.0 it writes, read back with pyarrow and ffmpeg alone."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

from so101_mjx import cli  # noqa: E402
from so101_mjx.data.record import record  # noqa: E402
from so101_mjx.render import visual_randomization  # noqa: E402
from tests.data.dataset_reader import assert_consistent, read_parquets  # noqa: E402

REACH = "SO101Reach-v0"
SHORT = {"episode_length": 6}  # scripted Reach: some episodes reach the target within 6 steps, some do not
FLOAT_VECTORS = {"observation.state": 14, "observation.environment_state": 6, "action": 4}
SCALARS = {"next.reward": pa.float32(), "next.done": pa.bool_(), "next.success": pa.bool_(), "timestamp": pa.float32(),
           "frame_index": pa.int64(), "episode_index": pa.int64(), "index": pa.int64(), "task_index": pa.int64()}
STAT_KEYS = ("min", "max", "mean", "std", "count", "q01", "q10", "q50", "q90", "q99")


def columns(table: pa.Table) -> dict[str, np.ndarray]:
    """Every data column as a numpy array: (N,) scalars, (N, D) vectors."""
    out = {}
    for name in table.column_names:
        col = table.column(name).combine_chunks()
        out[name] = (np.asarray(col.flatten()).reshape(len(col), -1) if pa.types.is_fixed_size_list(col.type)
                     else np.asarray(col))
    return out


def gl_available() -> bool:
    try:
        from so101_mjx.render.frames import FrameRenderer
        from so101_mjx.robot.scenes import load_model

        FrameRenderer(load_model("reach"), 16, 16).close()
        return True
    except RuntimeError:
        return False


@pytest.fixture(scope="module")
def video_dataset(tmp_path_factory):
    if not gl_available():
        pytest.skip("no offscreen GL context (MUJOCO_GL=egl or osmesa)")
    pytest.importorskip("imageio_ffmpeg")
    out = tmp_path_factory.mktemp("record") / "reach"
    summary = record(REACH, "scripted", 3, out, image_size=32, config=SHORT)
    return out, summary


def test_info_data_and_episodes_agree(video_dataset):
    root, summary = video_dataset
    assert_consistent(root)
    info = json.loads((root / "meta/info.json").read_text())
    data = read_parquets(root, "data")
    episodes = read_parquets(root, "meta/episodes").to_pylist()
    assert info["codebase_version"] == "v3.0" and info["robot_type"] == "so101" and info["fps"] == 10
    assert info["total_episodes"] == len(episodes) == summary["kept"] == 3
    assert info["total_frames"] == data.num_rows == summary["frames"] == sum(e["length"] for e in episodes)
    assert info["total_tasks"] == 1 and info["splits"] == {"train": "0:3"}
    assert info["data_path"] == "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
    assert info["video_path"] == "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4"
    assert (info["chunks_size"], info["data_files_size_in_mb"], info["video_files_size_in_mb"]) == (1000, 100, 200)
    video = info["features"]["observation.images.front"]
    assert (video["dtype"] == "video" and video["shape"] == [32, 32, 3]
            and video["names"] == ["height", "width", "channels"])
    assert video["info"]["video.codec"] == "av1" and video["info"]["video.fps"] == 10
    for name, size in FLOAT_VECTORS.items():
        assert data.schema.field(name).type == pa.list_(pa.float32(), size)
        assert info["features"][name]["dtype"] == "float32" and info["features"][name]["shape"] == [size]
        assert len(info["features"][name]["names"]) == size
    for name, kind in SCALARS.items():
        assert data.schema.field(name).type == kind and info["features"][name]["shape"] == [1]
    assert set(data.column_names) == set(FLOAT_VECTORS) | set(SCALARS)
    assert json.loads(data.schema.metadata[b"huggingface"])["info"]["features"]["action"]["length"] == 4

    d = columns(data)
    np.testing.assert_array_equal(d["index"], np.arange(data.num_rows))
    for e in episodes:
        rows = slice(e["dataset_from_index"], e["dataset_to_index"])
        assert (e["dataset_to_index"] - e["dataset_from_index"] == e["length"]
                and e["tasks"] == ["Move the gripper to the target."])
        assert (e["data/chunk_index"], e["data/file_index"], e["meta/episodes/chunk_index"],
                e["meta/episodes/file_index"]) == (0, 0, 0, 0)
        np.testing.assert_array_equal(d["episode_index"][rows], e["episode_index"])
        np.testing.assert_array_equal(d["frame_index"][rows], np.arange(e["length"]))
        np.testing.assert_allclose(d["timestamp"][rows], np.arange(e["length"]) / 10, atol=1e-6)
        np.testing.assert_array_equal(d["next.done"][rows], np.arange(e["length"]) == e["length"] - 1)
        key = "videos/observation.images.front/"
        assert (e[key + "chunk_index"], e[key + "file_index"]) == (0, 0)
        assert e[key + "from_timestamp"] == pytest.approx(e["dataset_from_index"] / 10)
        assert e[key + "to_timestamp"] == pytest.approx(e["dataset_to_index"] / 10)
    tasks = pq.read_table(root / "meta/tasks.parquet")
    assert (tasks.column("task").to_pylist() == ["Move the gripper to the target."]
            and tasks.column("task_index").to_pylist() == [0])
    assert json.loads(tasks.schema.metadata[b"pandas"])["index_columns"] == ["task"]


@pytest.mark.filterwarnings("ignore:os.fork")
def test_video_frames_match_the_data(video_dataset):
    import imageio_ffmpeg

    root, _ = video_dataset
    reader = imageio_ffmpeg.read_frames(str(root / "videos/observation.images.front/chunk-000/file-000.mp4"))
    meta = next(reader)
    frames = np.stack([np.frombuffer(f, np.uint8).reshape(32, 32, 3) for f in reader])
    assert meta["codec"] == "av1" and meta["size"] == (32, 32) and meta["fps"] == 10
    assert len(frames) == read_parquets(root, "data").num_rows
    stats = json.loads((root / "meta/stats.json").read_text())["observation.images.front"]
    mean = np.asarray(stats["mean"])
    assert mean.shape == (3, 1, 1) and stats["count"] == [len(frames)]  # episodes < 100 frames: every frame sampled
    assert np.all((np.asarray(stats["min"]) >= 0) & (np.asarray(stats["max"]) <= 1))
    # The stats come from the rendered frames, the video is lossy: means agree to a few grey levels.
    np.testing.assert_allclose(mean.reshape(3), frames.mean(axis=(0, 1, 2)) / 255, atol=3 / 255)


def check_stats(root: Path) -> None:
    """stats.json and every episode's stats columns, recomputed from the data."""
    d = columns(read_parquets(root, "data"))
    stats = json.loads((root / "meta/stats.json").read_text())
    episodes = read_parquets(root, "meta/episodes").to_pylist()
    for name, values in d.items():
        x = values.astype(np.float64).reshape(len(values), -1)
        s = {k: np.asarray(v) for k, v in stats[name].items()}
        assert set(s) == set(STAT_KEYS) and s["count"].tolist() == [len(x)]
        for key, expected in (("min", x.min(0)), ("max", x.max(0)), ("mean", x.mean(0)), ("std", x.std(0))):
            np.testing.assert_allclose(s[key], expected, atol=1e-6, err_msg=f"{name} {key}")
        per_episode = []
        for e in episodes:
            xe = x[e["dataset_from_index"] : e["dataset_to_index"]]
            es = {k: np.asarray(e[f"stats/{name}/{k}"]) for k in STAT_KEYS}
            np.testing.assert_allclose(es["mean"], xe.mean(0), atol=1e-6)
            np.testing.assert_allclose(es["std"], xe.std(0), atol=1e-6)
            width = (xe.max(0) - xe.min(0)) / 5000 + 1e-9  # one histogram bin
            order = np.sort(xe, axis=0)
            for q in (1, 10, 50, 90, 99):  # the order statistic of rank ceil(q n), to within a bin
                rank = min(max(int(np.ceil(q / 100 * len(xe))), 1), len(xe)) - 1
                assert np.all(np.abs(es[f"q{q:02d}"] - order[rank]) <= width), (name, q)
            per_episode.append(es)
        for q in ("q01", "q10", "q50"):
            np.testing.assert_allclose(s[q], np.min([e[q] for e in per_episode], 0), atol=1e-12)
        for q in ("q90", "q99"):
            np.testing.assert_allclose(s[q], np.max([e[q] for e in per_episode], 0), atol=1e-12)


def test_stats_recomputed_from_the_data(video_dataset):
    check_stats(video_dataset[0])


def first_states(root: Path) -> np.ndarray:
    """Each episode's first environment_state (the reset's target)."""
    d = columns(read_parquets(root, "data"))
    return d["observation.environment_state"][d["frame_index"] == 0]


@pytest.mark.slow
def test_only_success_keeps_the_successful_attempts(tmp_path):
    kept = record(REACH, "scripted", 2, tmp_path / "kept", image_size=None, only_success=True, config=SHORT)
    assert kept["kept"] == 2 and kept["tried"] > 2  # some of the short episodes fail
    d = columns(read_parquets(tmp_path / "kept", "data"))
    assert np.all(d["next.success"][d["next.done"]])
    every = record(REACH, "scripted", kept["tried"], tmp_path / "every", image_size=None, config=SHORT)
    e = columns(read_parquets(tmp_path / "every", "data"))
    succeeded = e["next.success"][e["next.done"]]
    assert every["successes"] == succeeded.sum() == 2 and succeeded[-1]  # the last try was the second success
    np.testing.assert_array_equal(first_states(tmp_path / "kept"), first_states(tmp_path / "every")[succeeded])
    runs = json.loads((tmp_path / "kept/meta/so101_mjx.json").read_text())["runs"]
    assert (runs[0]["tried"], runs[0]["kept"], runs[0]["only_success"]) == (kept["tried"], 2, True)


@pytest.mark.slow
def test_resume_appends_and_continues_the_attempts(tmp_path):
    root = tmp_path / "ds"
    record(REACH, "scripted", 2, root, image_size=None, config=SHORT)
    resumed = record(REACH, "scripted", 3, root, image_size=None, resume=True, config=SHORT)
    assert resumed["total_episodes"] == 5
    info = json.loads((root / "meta/info.json").read_text())
    data = columns(read_parquets(root, "data"))
    assert (info["total_episodes"] == 5 and info["total_frames"] == len(data["index"]) == 30
            and info["splits"] == {"train": "0:5"})
    np.testing.assert_array_equal(data["index"], np.arange(30))
    np.testing.assert_array_equal(np.unique(data["episode_index"]), np.arange(5))
    episodes = read_parquets(root, "meta/episodes").to_pylist()
    assert [(e["data/file_index"], e["meta/episodes/file_index"]) for e in episodes] == [(0, 0)] * 2 + [(1, 1)] * 3
    assert (root / "data/chunk-000/file-001.parquet").is_file()
    check_stats(root)  # over all five episodes
    once = record(REACH, "scripted", 5, tmp_path / "once", image_size=None, config=SHORT)
    assert once["kept"] == 5
    # attempts 2..4, not 0..2 again
    np.testing.assert_allclose(first_states(root), first_states(tmp_path / "once"), atol=1e-6)
    with pytest.raises(ValueError, match="observation.images.front"):
        record(REACH, "scripted", 1, root, image_size=32, resume=True, config=SHORT)


def test_file_rollover_at_the_limits(tmp_path):
    pytest.importorskip("imageio_ffmpeg")
    from so101_mjx.data.lerobot_dataset import DatasetWriter, video_feature
    from so101_mjx.data.stats import image_stats

    features = {"observation.images.cam": video_feature(16, 16, 10),
                "action": {"dtype": "float32", "shape": [2], "names": ["a", "b"]}}
    writer = DatasetWriter(tmp_path, features, 10, "so101", chunks_size=2, data_files_size_in_mb=1e-4,
                           video_files_size_in_mb=1e-4)
    rng = np.random.default_rng(0)
    frames = [rng.integers(0, 256, (n, 16, 16, 3), dtype=np.uint8) for n in (3, 4, 5, 6, 7)]
    for f in frames:
        writer.add_episode({"action": rng.normal(size=(len(f), 2))}, "task", {"observation.images.cam": f})
    writer.close()
    episodes = read_parquets(tmp_path, "meta/episodes").to_pylist()
    places = [(0, 0), (0, 1), (1, 0), (1, 1), (2, 0)]  # 2 files per chunk, every file over its limit after one episode
    assert [(e["data/chunk_index"], e["data/file_index"]) for e in episodes] == places
    key = "videos/observation.images.cam/"
    assert [(e[key + "chunk_index"], e[key + "file_index"]) for e in episodes] == places
    assert all(e[key + "from_timestamp"] == 0 for e in episodes)
    for (chunk, file), f in zip(places, frames):
        assert pq.read_table(tmp_path / f"data/chunk-{chunk:03d}/file-{file:03d}.parquet").num_rows == len(f)
        assert (tmp_path / f"videos/observation.images.cam/chunk-{chunk:03d}/file-{file:03d}.mp4").is_file()
    assert not list(tmp_path.glob(".encoding-*"))
    stats = image_stats(frames[0])
    np.testing.assert_allclose(stats["mean"].reshape(3), frames[0].mean(axis=(0, 1, 2)) / 255, atol=1e-12)
    np.testing.assert_allclose(stats["std"].reshape(3), frames[0].reshape(-1, 3).std(0) / 255, atol=1e-12)


@pytest.mark.parametrize(("args", "message"), [
    (["--cameras", "top"], "camera names of Reach: ['front', 'wrist'], got ['top']"),
    (["--episodes", "0"], "--episodes"),
    (["--image-size", "33"], "--image-size"),
    (["--fps", "7"], "--fps"),
    (["--resume"], "no dataset to resume"),
    (["--visual-randomization", '{"hue": 1}'], "unknown visual_randomization field(s) ['hue']"),
])
def test_bad_arguments_are_one_line_errors(tmp_path, capsys, args, message):
    argv = ["record", "--env", REACH, "--episodes", "1", "--out", str(tmp_path / "out"), *args]
    assert cli.main(argv) == 2
    assert message in capsys.readouterr().err


def test_existing_output_and_missing_pyarrow(tmp_path, capsys, monkeypatch):
    (tmp_path / "file").write_text("")
    assert cli.main(["record", "--env", REACH, "--episodes", "1", "--out", str(tmp_path), "--no-video"]) == 2
    assert "not an empty directory" in capsys.readouterr().err
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    assert cli.main(["record", "--env", REACH, "--episodes", "1", "--out", str(tmp_path / "new"), "--no-video"]) == 2
    assert "pip install pyarrow" in capsys.readouterr().err


@pytest.mark.slow
def test_frames_are_the_gym_render():
    """A frame recorded with --image-quality full is what the gym env's render() shows for the same
    state (camera, markers)."""
    if not gl_available():
        pytest.skip("no offscreen GL context (MUJOCO_GL=egl or osmesa)")
    import gymnasium
    import jax

    import so101_mjx.gym
    from so101_mjx.data.record import _episode_fns, _Frames, policy_and_env, run_worlds

    _, env, policy, _ = policy_and_env("scripted", REACH, "c", SHORT)
    key = jax.random.PRNGKey(3)[None]
    traj = run_worlds(env, _episode_fns(env, policy), key)
    frames = _Frames(env, 64, ["front"], "full")
    try:
        recorded = frames.episode(traj, 0)["observation.images.front"][0]
    finally:
        frames.close()
    gym_env = gymnasium.make("so101_mjx/" + REACH, render_spec=so101_mjx.gym.GymRenderingSpec(64, 64),
                             action_scale=env.config.action_scale, **SHORT).unwrapped
    try:
        gym_env.reset_to(gym_env.env.reset(jax.random.fold_in(key[0], 0)))
        np.testing.assert_array_equal(recorded, gym_env.render())
        assert recorded.std() > 0
    finally:
        gym_env.close()


def test_exported_policy_drives_the_episodes(tmp_path):
    from so101_mjx.training.policy import NumpyPolicy, PolicyWeights

    rng = np.random.default_rng(0)
    weights = PolicyWeights(mean=np.zeros(20, np.float32), std=np.ones(20, np.float32), activation="tanh",
                            kernels=(rng.normal(size=(20, 8)).astype(np.float32),
                                     rng.normal(size=(8, 8)).astype(np.float32)),
                            biases=(np.zeros(8, np.float32), np.zeros(8, np.float32)))
    meta = {"env": REACH, "env_config": {"action_scale": 0.05, **SHORT}, "obs_size": 20,
            "network": {"policy_hidden_layer_sizes": [8]},
            "action_map": {"scale": [1.0, 1.0, 1.0, 0.5], "offset": [0.0, 0.0, 0.0, 0.5]}}
    policy = NumpyPolicy(weights, meta, meta["action_map"]["scale"], meta["action_map"]["offset"])
    policy.save(tmp_path / "policy.npz")
    summary = record(None, str(tmp_path / "policy.npz"), 2, tmp_path / "ds", image_size=None)
    assert summary["env"] == REACH and summary["frames"] == 12  # the policy's own env config: 6-step episodes
    d = columns(read_parquets(tmp_path / "ds", "data"))
    obs = np.concatenate([d["observation.state"], d["observation.environment_state"]], axis=1)
    np.testing.assert_allclose(d["action"], policy(obs), atol=1e-5)
    assert np.ptp(d["action"], axis=0).min() > 0  # the actions depend on the observations
    with pytest.raises(ValueError, match="SO101Reach-v0"):  # another env than the policy's
        record("SO101PickCube-v0", str(tmp_path / "policy.npz"), 1, tmp_path / "other", image_size=None)


@pytest.mark.slow
def test_pick_cube_demonstrations_lift_the_block(tmp_path):
    """``--policy demonstrator`` records PickCube episodes that succeed (the reference's controller never lifts),
    in the config it needs (``demonstrator_config``: top-down IK) without being told."""
    out = record("SO101PickCube-v0", "demonstrator", 2, tmp_path / "ds", image_size=None, only_success=True,
                 max_tries=6)
    d = columns(read_parquets(tmp_path / "ds", "data"))
    assert out["kept"] == 2 and np.all(d["next.success"][d["next.done"]])
    assert json.loads((tmp_path / "ds/meta/so101_mjx.json").read_text())["runs"][0]["policy"] == "demonstrator"


@pytest.mark.slow
@pytest.mark.parametrize("level", ["standard", "cluttered"])
def test_visual_randomization_draws_per_episode(level):
    """With visual randomization (and its scenery) the same state looks different in two episodes' draws, the
    physics data are untouched, and a key gives the same frames again."""
    if not gl_available():
        pytest.skip("no offscreen GL context (MUJOCO_GL=egl or osmesa)")
    import jax

    from so101_mjx.data.record import _episode_fns, _Frames, policy_and_env, run_worlds

    _, env, policy, _ = policy_and_env("scripted", REACH, "c", SHORT)
    traj = run_worlds(env, _episode_fns(env, policy), jax.random.PRNGKey(3)[None])
    plain, randomized = (_Frames(env, 32, ["front"], "fast"),
                         _Frames(env, 32, ["front"], "fast", visual_randomization.LEVELS[level]))
    try:
        base = plain.episode(traj, 0)["observation.images.front"]
        a, b, again = (randomized.episode(traj, 0, jax.random.PRNGKey(k))["observation.images.front"]
                       for k in (0, 1, 0))
    finally:
        plain.close()
        randomized.close()
    assert a.shape == base.shape and a.dtype == np.uint8
    assert np.abs(a.astype(int) - b).mean() > 1.0 and np.abs(a.astype(int) - base).mean() > 1.0
    np.testing.assert_array_equal(a, again)


@pytest.mark.slow
def test_a_camera_file_sets_the_recorded_cameras_latency():
    """--camera-spec front=FILE with the scene's own front camera and a latency of 2 ticks: the same frames,
    each two steps late (the first one held)."""
    if not gl_available():
        pytest.skip("no offscreen GL context (MUJOCO_GL=egl or osmesa)")
    import dataclasses

    import jax

    from so101_mjx.data.record import _episode_fns, _Frames, policy_and_env, run_worlds
    from so101_mjx.render.camera import spec_from_model

    _, env, policy, _ = policy_and_env("scripted", REACH, "c", SHORT)
    traj = run_worlds(env, _episode_fns(env, policy), jax.random.PRNGKey(5)[None])
    late = dataclasses.replace(spec_from_model(env.mj_model, "front"), latency=2)
    frames = {}
    for name, specs in (("plain", None), ("late", {"front": late})):
        recorder = _Frames(env, 32, ["front"], "fast", specs=specs)
        try:
            frames[name] = recorder.episode(traj, 0)["observation.images.front"]
        finally:
            recorder.close()
    plain = frames["plain"]
    np.testing.assert_array_equal(frames["late"][2:], plain[:-2])
    np.testing.assert_array_equal(frames["late"][:2], plain[[0, 0]])
    assert not np.array_equal(plain[0], plain[-1])  # the arm moved: the shift is visible


@pytest.mark.parametrize("value, needle", [("wrist", "expected CAMERA=FILE"), ("wrist=/nope.yaml", "nope.yaml")])
def test_a_bad_camera_spec_is_one_line(tmp_path, capsys, value, needle):
    assert cli.main(["record", "--env", REACH, "--episodes", "1", "--out", str(tmp_path / "d"),
                     "--camera-spec", value]) == 2
    err = capsys.readouterr().err  # argparse: the usage, then one error line
    assert "Traceback" not in err and "--camera-spec" in err.splitlines()[-1] and needle in err.splitlines()[-1], err
