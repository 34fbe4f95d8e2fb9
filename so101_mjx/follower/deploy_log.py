"""``deploy``'s log: the episodes run (:class:`Log`), written as a LeRobotDataset v3.0 with the follower's
feature names, and :data:`LOG_META`, the run's policy, why it stopped and which episodes were cut short."""

from __future__ import annotations

import contextlib
import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from so101_mjx.envs import registry
from so101_mjx.errors import ExistingFileError, ParameterError
from so101_mjx.follower.actions import FEATURE_KEYS

LOG_META = "meta/so101_mjx_deploy.json"  # the log's run: policy, why it stopped, which episodes were cut short


@dataclasses.dataclass
class Log:
    """The episodes run so far, as arrays for the dataset writer."""

    episodes: list[dict[str, np.ndarray]] = dataclasses.field(default_factory=list)
    successes: list[bool] = dataclasses.field(default_factory=list)
    # stopped before its last action (interrupt, time limit, error)
    cut_short: list[bool] = dataclasses.field(default_factory=list)
    clamped: int = 0  # actions the robot changed (max_relative_target or range clipping)

    def add(self, frames: list[tuple], success: bool, cut_short: bool) -> None:
        """One episode from its ``frames`` ``(state (6,), action sent (6,), environment state or None)``; none:
        nothing."""
        if not frames:
            return
        states, actions, env_states = zip(*frames, strict=True)
        episode = {"observation.state": np.asarray(states, np.float32), "action": np.asarray(actions, np.float32)}
        if env_states[0] is not None:
            episode["observation.environment_state"] = np.asarray(env_states, np.float32)
        self.episodes.append(episode)
        self.successes.append(success)
        self.cut_short.append(cut_short)


class ExistingLogError(ExistingFileError, ParameterError):
    """The ``dataset`` deploy logs into exists and is not empty."""


@contextlib.contextmanager
def dataset_log(root: str | Path, p: Any, robot_type: str, environment_state: bool) -> Iterator[Any]:
    """A writer of a new LeRobotDataset v3.0 at ``root`` (the log), its writer lock held until the block
    ends; InputError when ``root`` is not a new or empty directory (checked before the robot connects)."""
    from so101_mjx._lock import exclusive
    from so101_mjx.data.lerobot_dataset import DatasetWriter
    from so101_mjx.data.record import environment_state_names

    names = list(FEATURE_KEYS)
    vector = lambda n: {"dtype": "float32", "shape": [len(n)], "names": n}  # noqa: E731
    features = {"observation.state": vector(names), "action": vector(names)}
    if environment_state:
        features["observation.environment_state"] = vector(environment_state_names(p.task))
    with exclusive(root, "deploy"):
        try:
            writer = DatasetWriter(root, features, p.fps, robot_type)
        except ExistingFileError:
            raise ExistingLogError(f"dataset {root} exists and is not empty: deploy logs into a new or empty "
                                   "directory; nothing was sent", "dataset") from None
        yield writer


def write_log(writer, log: Log, p: Any, stopped: str) -> None:
    """The episodes of ``log`` into ``writer`` (:func:`dataset_log`), and :data:`LOG_META`: the run's
    ``policy``, ``stopped`` and per episode its ``frames`` and ``cut_short``."""
    for episode in log.episodes:
        writer.add_episode(episode, registry.task(p.task).instruction)
    meta = {"policy": p.path, "task": p.task, "fps": p.fps, "units": p.units, "stopped": stopped,
            "episodes": [{"episode_index": writer.total_episodes - len(log.episodes) + i, "frames": len(e["action"]),
                          "cut_short": cut}
                         for i, (e, cut) in enumerate(zip(log.episodes, log.cut_short, strict=True))]}
    writer.close({LOG_META: json.dumps(meta, indent=1) + "\n"})
