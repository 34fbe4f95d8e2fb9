"""What every so101_mjx ONNX export shares: the opset, the metadata key and the model wrapper."""

from __future__ import annotations

import json
from typing import Any

OPSET = 17
METADATA_KEY = "so101_mjx"  # model property holding the export's metadata as JSON


def graph_model(graph, meta: dict[str, Any]):
    """``graph`` (an ``onnx.GraphProto``) as a checked model: opset :data:`OPSET`, IR version ≤ 9
    (readable by onnxruntime ≥ 1.18), ``meta`` as JSON under :data:`METADATA_KEY`."""
    import onnx
    from onnx import helper

    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="so101_mjx")
    model.ir_version = min(model.ir_version, 9)
    helper.set_model_props(model, {METADATA_KEY: json.dumps(meta), "env": meta["env"], "version": meta["version"]})
    onnx.checker.check_model(model)
    return model
