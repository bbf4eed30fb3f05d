"""Helpers over onnx's protobuf that every pass shares (no passes here): the walk over a model's graphs and
nodes, the constants of a scope, the one tensor reader, the one dead-node remover, the one constant folder,
and the node builder."""
