"""What the rewriter and the lowering know of a model's types and ranks: the typing copy (only what ORT
enforces: initializer dims, Constant values, the main graph's input shapes, a Loop's counters) and the
inference layers run on it (ONNX's shape inference with data propagation, then ORT's symbolic shape
inference), read back as ``TensorInfo`` per name. The README's "How ranks are found" says why each
layer is trusted where it is."""
