"""What a rewritten GatherMultiaxis node replaced, recorded in its ``metadata_props`` (ignored by tools that
do not know the key, ORT included), so that the lowering can give back the gather it came from. The record
is a claim, not a proof: ``graphs.lower.recorded_form`` uses it only where the graph proves it, and a record
that is not one is ignored, never an error. A changed model also gets one model-level entry (``MODEL_KEY``)
saying how to run or lower it; a lowering that leaves no GatherMultiaxis node removes it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from onnx import ModelProto, NodeProto

from ..ops import __version__
from .sources.registry import RECORDED_ATTRIBUTES

KEY = "gathermultiaxis.replaces"
MODEL_KEY = "gathermultiaxis"
_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"))  # json.dumps' own, made once


@dataclass(frozen=True)
class ReplacedGather:
    """The standard gather a GatherMultiaxis node stands for: ``output = op_type(data, indices, **attributes)``."""

    op_type: str
    data: str
    indices: str
    output: str
    attributes: dict[str, int] = field(default_factory=dict)
    name: str = ""              # the replaced node's own name ("" for none)
    domain: str | None = None   # its domain field where it was set ("" or "ai.onnx"), else None

    def to_text(self) -> str:
        """The record as the ``metadata_props`` value holds it."""
        value = {"op_type": self.op_type, "inputs": [self.data, self.indices], "output": self.output,
                 "attributes": self.attributes, "name": self.name}
        if self.domain is not None:
            value["domain"] = self.domain
        return _ENCODER.encode(value)

    @classmethod
    def from_text(cls, text: str) -> "ReplacedGather | None":
        """Read a record back."""
        try:
            value = json.loads(text)
            data, indices = value["inputs"]
            op_type, output, domain, name = value["op_type"], value["output"], value.get("domain"), value.get("name", "")
            attributes = value.get("attributes", {})
            if (op_type not in RECORDED_ATTRIBUTES or domain not in (None, "", "ai.onnx")
                    or not all(isinstance(n, str) and n for n in (data, indices, output))
                    or not isinstance(name, str) or not isinstance(attributes, dict)
                    or not set(attributes) <= set(RECORDED_ATTRIBUTES[op_type])
                    or not all(isinstance(v, int) and not isinstance(v, bool) and -2**63 <= v < 2**63
                               for v in attributes.values())):  # an ONNX attribute holds an int64
                return None
            return cls(op_type, data, indices, output, dict(attributes), name, domain)
        except (ValueError, KeyError, TypeError, AttributeError):
            return None


def record(node: NodeProto, replaced: NodeProto) -> None:
    """Write onto GatherMultiaxis ``node`` that it replaces the gather ``replaced``; the replaced node's own
    metadata (an exporter's source locations and scopes, not a record it carried) and doc string travel
    with it.
    """
    kept = [entry for entry in (*node.metadata_props, *replaced.metadata_props) if entry.key != KEY]
    del node.metadata_props[:]
    node.metadata_props.extend(kept)
    if replaced.doc_string:
        node.doc_string = replaced.doc_string
    attributes = {a.name: a.i for a in replaced.attribute if a.HasField("i")}
    entry = node.metadata_props.add()
    entry.key = KEY
    entry.value = ReplacedGather(replaced.op_type, replaced.input[0], replaced.input[1], replaced.output[0],
                                 attributes, replaced.name,
                                 replaced.domain if replaced.HasField("domain") else None).to_text()


def carry_metadata(source: NodeProto, target: NodeProto) -> None:
    """Give ``target`` (the gather given back) ``source``'s metadata but the record, and its doc string."""
    target.metadata_props.extend(entry for entry in source.metadata_props if entry.key != KEY)
    if source.doc_string:
        target.doc_string = source.doc_string


def replaced_gather(node: NodeProto) -> ReplacedGather | None:
    """What ``node`` records that it replaces."""
    texts = [entry.value for entry in getattr(node, "metadata_props", ()) if entry.key == KEY]
    return ReplacedGather.from_text(texts[0]) if len(texts) == 1 else None


def model_note() -> str:
    """The text of the model-level entry: the package, its version, how to run or lower the file."""
    return (f"rewritten by gathermultiaxis {__version__}: run with gathermultiaxis.InferenceSession, or "
            f"`gathermultiaxis lower` it for plain ONNX runtimes")


def mark_rewritten(model: ModelProto) -> None:
    """Set ``model``'s entry under ``MODEL_KEY`` to ``model_note()`` (one entry, where it was or last)."""
    entries = [(entry.key, entry.value) for entry in model.metadata_props]
    keys = [key for key, _ in entries]
    at = keys.index(MODEL_KEY) if MODEL_KEY in keys else len(entries)
    others = [entry for entry in entries if entry[0] != MODEL_KEY]  # one entry under the key, never two
    del model.metadata_props[:]
    for key, value in others[:at] + [(MODEL_KEY, model_note())] + others[at:]:
        model.metadata_props.add(key=key, value=value)


def unmark_rewritten(model: ModelProto) -> bool:
    """Remove ``model``'s entries under ``MODEL_KEY``."""
    kept = [entry for entry in model.metadata_props if entry.key != MODEL_KEY]
    if len(kept) == len(model.metadata_props):
        return False
    del model.metadata_props[:]
    model.metadata_props.extend(kept)
    return True


__all__ = ["KEY", "MODEL_KEY", "RECORDED_ATTRIBUTES", "ReplacedGather", "carry_metadata", "mark_rewritten", "model_note",
           "record", "replaced_gather", "unmark_rewritten"]
