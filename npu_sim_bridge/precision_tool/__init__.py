"""precision_tool's TensorFlow helpers (tf_config) for the simulator: dump, overflow and fusion switches."""
