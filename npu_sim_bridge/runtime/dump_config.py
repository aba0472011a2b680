"""DumpConfig: NPURunConfig's dump settings, written to the NpuOptimizer keys enable_dump, dump_path, dump_step, ...

Values are checked by npu_sim_bridge.config when the NPURunConfig is built (so a bad dump_step
fails there with the same message a Session would give).
"""


class DumpConfig:
    """Tensor dump and overflow detection settings, as npu_bridge's DumpConfig takes them."""

    def __init__(self, enable_dump=False, dump_path=None, dump_step=None, dump_mode="output",
                 enable_dump_debug=False, dump_debug_mode="all", dump_data="tensor", dump_layer=None):
        self._enable_dump = enable_dump
        self._dump_path = dump_path
        self._dump_step = dump_step
        self._dump_mode = dump_mode
        self._enable_dump_debug = enable_dump_debug
        self._dump_debug_mode = dump_debug_mode
        self.dump_data = dump_data
        self.dump_layer = dump_layer

    def parameters(self):
        """parameter_map key -> value, as NPUEstimator writes them (None values left out)."""
        values = {
            "enable_dump": self._enable_dump,
            "enable_dump_debug": self._enable_dump_debug,
            "dump_path": self._dump_path,
            "dump_step": self._dump_step,
            "dump_mode": self._dump_mode,
            "dump_debug_mode": self._dump_debug_mode,
            "dump_data": self.dump_data,
            "dump_layer": self.dump_layer,
        }
        return {key: value for key, value in values.items() if value is not None}
