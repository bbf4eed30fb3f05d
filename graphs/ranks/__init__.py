"""What is known of the types and ranks of a model's values: the inference layers the passes read."""
