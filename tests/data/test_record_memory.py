"""record estimates its frames and worlds before it creates the dataset: a size past the machine's
memory is one InputError naming the option, and nothing is written."""

import pytest

from so101_mjx import _checks as checks
from so101_mjx.errors import InputError

pytest.importorskip("pyarrow")


def test_image_size_past_the_machines_memory_writes_nothing(tmp_path, monkeypatch):
    from so101_mjx.data.record import record

    monkeypatch.setattr(checks, "host_memory", lambda: 2**20)  # 1 MiB: the worlds fit, an episode's frames do not
    frames = r"\(an episode's .* frames of 128x128x3 bytes, twice\)"
    with pytest.raises(InputError, match=rf"^image_size 128 needs about .* MiB {frames}"):
        record("SO101Reach-v0", "scripted", 1, tmp_path / "ds", backend="c", image_size=128, num_envs=1)
    assert not (tmp_path / "ds").exists()
