"""Rewriting of ONNX models: Gather, GatherElements and GatherND become GatherMultiaxis."""
