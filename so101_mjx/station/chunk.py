"""The station's action chunk: every arm's chunk, with the reference timestamp and row rate they share.

The arm containers (:mod:`so101_mjx.station.interface`) leave the time base to the enclosing
station chunk (the arm evaluation interface: row i of an arm's chunk is its target i / rate seconds after the chunk's
reference timestamp, both carried by ``station.Station_ActionChunk``). This is that container.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from so101_mjx import _checks as checks
from so101_mjx.errors import InputError
from so101_mjx.station.interface import MotorizedArm_ActionChunk, MotorizedArmSpec

__all__ = ["Station_ActionChunk"]


@dataclasses.dataclass(frozen=True, eq=False)
class Station_ActionChunk:
    """Action chunks of a station's arms, played from a reference timestamp.

    Row i of every arm's chunk is that arm's target at ``timestamp + i / rate`` on the station
    clock (the clock of the observations' ``timestamp``): a policy stamps the chunk with the
    timestamp of the observation it acted on, and the station skips the rows already in the past.

    Attributes:
        timestamp: reference time on the station clock, [s], finite.
        rate: rows per second, [Hz], finite > 0.
        arms: one :class:`MotorizedArm_ActionChunk` per arm, all with the same horizon (a single
            chunk is taken as a one-arm station's).

    Raises:
        ValueError: naming the invalid field.
    """

    timestamp: float
    rate: float
    arms: tuple[MotorizedArm_ActionChunk, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "timestamp", checks.real("timestamp", self.timestamp, unit=" s"))
        object.__setattr__(self, "rate", checks.real("rate", self.rate, gt=0, unit=" Hz"))
        arms = (self.arms,) if isinstance(self.arms, MotorizedArm_ActionChunk) else self.arms
        if isinstance(arms, (str, bytes)) or not isinstance(arms, Sequence) or not arms:
            raise InputError("arms must be a MotorizedArm_ActionChunk or a non-empty sequence of them, got "
                             f"{self.arms!r:.80}")
        for i, chunk in enumerate(arms):
            if not isinstance(chunk, MotorizedArm_ActionChunk):
                raise InputError(f"arms[{i}] must be a MotorizedArm_ActionChunk, got {type(chunk).__name__}")
            if chunk.horizon != arms[0].horizon:
                raise InputError(f"arms[{i}] must have the horizon of arms[0] ({arms[0].horizon} rows), got "
                                 f"{chunk.horizon}")
        object.__setattr__(self, "arms", tuple(arms))

    @property
    def horizon(self) -> int:
        """Rows per arm."""
        return self.arms[0].horizon

    def __len__(self) -> int:
        return self.horizon

    @property
    def times(self) -> np.ndarray:
        """(horizon,) station time of each row, ``timestamp + i / rate``, [s]."""
        return self.timestamp + np.arange(self.horizon) / self.rate

    @property
    def end_time(self) -> float:
        """Station time of the last row, [s]."""
        return self.timestamp + (self.horizon - 1) / self.rate

    def validate(self, specs: MotorizedArmSpec | Sequence[MotorizedArmSpec]) -> None:
        """Re-check every arm's chunk against its spec (one spec per arm, in order; a single spec
        for a one-arm station) and the shared horizon; ``ValueError`` naming the field."""
        self.__post_init__()
        specs = (specs,) if isinstance(specs, MotorizedArmSpec) else specs
        if not isinstance(specs, Sequence) or len(specs) != len(self.arms):
            raise InputError(f"specs must be one MotorizedArmSpec per arm ({len(self.arms)}), got {specs!r:.80}")
        for chunk, spec in zip(self.arms, specs):
            chunk.validate(spec, self.horizon)
