"""A mesh file too short for a binary STL header is one InputError line naming it."""

from __future__ import annotations

import pytest

from so101_mjx.errors import InputError
from so101_mjx.render.batch import read_stl


@pytest.mark.parametrize("data", [b"", b"solid ascii", b"\0" * 83])
def test_a_truncated_stl_is_one_line(tmp_path, data):
    (tmp_path / "mesh.stl").write_bytes(data)
    with pytest.raises(InputError, match="mesh.stl: not a binary STL file"):
        read_stl(tmp_path / "mesh.stl")
