"""Builds the TensorBoard summaries of a run: headline scalars and the manifest blob."""
from __future__ import annotations

import json
import time

from tensorboard.compat.proto import event_pb2, summary_pb2, tensor_pb2, tensor_shape_pb2, types_pb2

from . import metadata


def _scalar_value(tag: str, value: float) -> summary_pb2.Summary.Value:
    meta = summary_pb2.SummaryMetadata(
        plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="scalars"),
        data_class=summary_pb2.DATA_CLASS_SCALAR,
    )
    tensor = tensor_pb2.TensorProto(dtype=types_pb2.DT_FLOAT, float_val=[value],
                                    tensor_shape=tensor_shape_pb2.TensorShapeProto())
    return summary_pb2.Summary.Value(tag=tag, metadata=meta, tensor=tensor)


def _manifest_value(manifest: dict) -> summary_pb2.Summary.Value:
    meta = summary_pb2.SummaryMetadata(
        plugin_data=summary_pb2.SummaryMetadata.PluginData(
            plugin_name=metadata.PLUGIN_NAME, content=metadata.plugin_content()),
        data_class=summary_pb2.DATA_CLASS_BLOB_SEQUENCE,
        summary_description="tb-hwprof profile manifest (JSON); tables live in plugins/tb_hwprof/",
    )
    blob = json.dumps(manifest, sort_keys=True).encode()
    tensor = tensor_pb2.TensorProto(
        dtype=types_pb2.DT_STRING, string_val=[blob],
        tensor_shape=tensor_shape_pb2.TensorShapeProto(dim=[tensor_shape_pb2.TensorShapeProto.Dim(size=1)]))
    return summary_pb2.Summary.Value(tag=metadata.MANIFEST_TAG, metadata=meta, tensor=tensor)


def run_events(scalars: dict, manifest: dict, step: int):
    """Serialized events: file version, the manifest blob, then one event holding every scalar."""
    wall = time.time()
    yield event_pb2.Event(wall_time=wall, file_version="brain.Event:2").SerializeToString()
    yield event_pb2.Event(wall_time=wall, step=step,
                          summary=summary_pb2.Summary(value=[_manifest_value(manifest)])).SerializeToString()
    values = [_scalar_value(metadata.SCALAR_PREFIX + tag, v) for tag, v in sorted(scalars.items())]
    if values:
        yield event_pb2.Event(wall_time=wall, step=step, summary=summary_pb2.Summary(value=values)).SerializeToString()


def series_events(points):
    """Serialized events of an optimisation series: file version, then per (scalars, step) one event
    holding every headline scalar of that run at its step (no manifest: the series is no run of ours)."""
    wall = time.time()
    yield event_pb2.Event(wall_time=wall, file_version="brain.Event:2").SerializeToString()
    for scalars, step in points:
        values = [_scalar_value(metadata.SCALAR_PREFIX + tag, v) for tag, v in sorted(scalars.items())]
        if values:
            yield event_pb2.Event(wall_time=wall, step=step, summary=summary_pb2.Summary(value=values)).SerializeToString()
