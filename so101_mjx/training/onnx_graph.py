"""What every so101_mjx ONNX export shares: the opset, the metadata key, the model wrapper, and
the checks of a file read back (its metadata; its graph against the one export writes)."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

from so101_mjx import _schema as schema
from so101_mjx.errors import InputError

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


def load(path: str | Path):
    """The ``onnx.ModelProto`` in ``path``, its external data not followed (exports keep every
    tensor inside the file); ValueError naming ``path`` when it is not an ONNX model."""
    import onnx

    try:
        return onnx.load(str(path), load_external_data=False)
    except Exception as err:  # protobuf's DecodeError, OSError: not ONNX
        raise InputError(f"{path} is not an exported so101_mjx ONNX file (not ONNX: {type(err).__name__})") from None


def read_metadata(model, source: str | Path) -> dict[str, Any]:
    """The export metadata (the JSON object under :data:`METADATA_KEY`); ValueError naming ``source``
    when it is missing or not a JSON object."""
    props = {p.key: p.value for p in model.metadata_props}
    if METADATA_KEY not in props:
        raise InputError(f"{source} is not an exported so101_mjx ONNX file: its metadata property {METADATA_KEY!r} "
                         f"is missing (found {sorted(props)})")
    try:
        meta = json.loads(props[METADATA_KEY])
    except json.JSONDecodeError as err:
        raise InputError(f"{source}: metadata property {METADATA_KEY!r} is not valid JSON ({err.msg})") from None
    return schema.fields(source, meta, {}, where=f"metadata property {METADATA_KEY!r}.")


def initializers(model, source: str | Path) -> dict[str, Any]:
    """``{name: numpy array}`` of the graph's initializers stored inside the file (external ones are
    left out: :func:`check_structure` refuses them); ValueError naming ``source`` and the tensor
    when it is malformed, not real or holds a non-finite float."""
    from onnx import numpy_helper

    try:
        arrays = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer if not t.data_location}
    except Exception as err:  # a tensor whose data does not match its type or shape
        raise InputError(f"{source}: unreadable initializer ({type(err).__name__}: {str(err)[:80]})") from None
    return {name: schema.array(source, name, value, kinds="biuf") for name, value in arrays.items()}


def check_structure(model, expected, source: str | Path) -> None:
    """ValueError naming ``source`` unless ``model``'s graph is ``expected`` (the ``onnx.GraphProto``
    export builds from the same weights): opset :data:`OPSET`; the same inputs and outputs (names,
    element types, shapes); the same nodes in order (operator, inputs, outputs, attributes); the
    same initializers (names, types, shapes, values), stored inside the file. A graph edited after
    export (an activation swapped, a constant changed, a node added) is refused before anything runs it."""
    import numpy as np
    from onnx import helper, numpy_helper

    graph = model.graph
    opsets = sorted((o.domain, o.version) for o in model.opset_import)
    if opsets != [("", OPSET)] or model.functions or graph.sparse_initializer:
        raise InputError(f"{source}: opsets {opsets}, {len(model.functions)} functions, "
                         f"{len(graph.sparse_initializer)} sparse initializers; exports use opset {OPSET} alone, "
                         "with neither")

    def io(values) -> list[tuple]:
        return [(v.name, v.type.tensor_type.elem_type,
                 [d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim])
                for v in values]

    def tensors(g) -> list[tuple]:
        return sorted((t.name, t.data_type, list(t.dims), t.data_location) for t in g.initializer)

    for what, got, want in (("inputs", io(graph.input), io(expected.input)),
                            ("outputs", io(graph.output), io(expected.output)),
                            ("initializers", tensors(graph), tensors(expected))):
        if got != want:
            raise InputError(f"{source}: graph {what} {str(got)[:300]} differ from the export's {str(want)[:300]}")
    values = initializers(model, source)
    for t in expected.initializer:
        if not np.array_equal(values[t.name], numpy_helper.to_array(t)):
            raise InputError(f"{source}: graph constant {t.name} differs from the one export writes (edited "
                             "after export?)")

    def op(n) -> str:
        attrs = {a.name: helper.get_attribute_value(a) for a in n.attribute}
        return (f"{n.domain + '.' if n.domain else ''}{n.op_type}({', '.join(n.input)}) -> {', '.join(n.output)}"
                + (f" {attrs}" if attrs else ""))

    for i, (a, b) in enumerate(itertools.zip_longest(map(op, graph.node), map(op, expected.node))):
        if a != b:
            raise InputError(f"{source}: graph node {i} is {a or 'missing'}, the export writes {b or 'no such node'} "
                             "(edited after export?)")
