"""The one table of Ascend 910 constants the estimate rests on, each marked datasheet, derived, fitted or default.

Sources (../shared/reference/ascend910_hardware.md): CANN's platform files (Ascend910A.ini, Ascend910B1-4.ini)
for cores, cube shape, clocks and buffers; HBM and host-link bandwidths from secondary sources. `fitted`
constants were fitted by benchmarks/calibrate_estimate.py to the two measured throughputs (ResNet-50 batch 256:
2,115 images/s; BERT-Large batch 96: 269 sentences/s); `default` constants are plausible values nobody measured,
kept out of the fit because two anchors cannot pin more than two constants.
"""

from __future__ import annotations

import dataclasses
from typing import Mapping

from npu_sim_bridge.errors import ConfigError

DATASHEET = "datasheet"   # read in a primary source
DERIVED = "derived"       # arithmetic on datasheet values
FITTED = "fitted"         # fitted to the two measured throughputs
DEFAULT = "default"       # a tunable guess, not fitted


@dataclasses.dataclass(frozen=True)
class Constant:
    """One constant: its value, unit, where it comes from and what it means."""

    value: float
    unit: str
    source: str
    doc: str


@dataclasses.dataclass(frozen=True)
class Hardware:
    """A SoC preset: a name and its constants by key (see TABLE_910A for the keys)."""

    soc: str
    constants: Mapping[str, Constant]
    fp32_cube: bool             # the cube takes float32 inputs (910B) or only float16 (910A)
    aicpu_era_ops: frozenset    # ops the AI Core library lists but this generation ran on AI CPU

    def __getitem__(self, key: str) -> float:
        return self.constants[key].value

    @property
    def cube_flops(self) -> float:
        """Cube peak in FLOP/s: cores x MACs per cycle x 2 x clock."""
        return self["cube_cores"] * self["cube_macs_per_cycle"] * 2 * self["clock_mhz"] * 1e6

    @property
    def vector_flops(self) -> float:
        """Vector peak in float16 FLOP/s (float32 runs at half): cores x lanes x clock."""
        return self["vector_cores"] * self["vector_fp16_lanes"] * self["clock_mhz"] * 1e6

    def with_values(self, **values: float) -> "Hardware":
        """A copy with some constants replaced (calibration, --param est_*)."""
        table = dict(self.constants)
        for key, value in values.items():
            if key not in table:
                raise ConfigError(f"hardware constant {key!r} does not exist; the constants are: "
                                  f"{', '.join(sorted(table))}")
            table[key] = dataclasses.replace(table[key], value=float(value))
        return dataclasses.replace(self, constants=table)

    def rows(self) -> list[dict]:
        """The table as rows (key, value, unit, source, doc), for output."""
        return [dict(key=key, value=c.value, unit=c.unit, source=c.source, doc=c.doc)
                for key, c in self.constants.items()]


TABLE_910A: dict[str, Constant] = {
    "cube_cores": Constant(32, "cores", DATASHEET, "AI Cores running cube work"),
    "vector_cores": Constant(32, "cores", DATASHEET, "cores running vector work (the same cores on the 910A)"),
    "cube_macs_per_cycle": Constant(4096, "MAC/cycle/core", DATASHEET, "16x16x16 float16 MACs per core per cycle"),
    "vector_fp16_lanes": Constant(128, "FLOP/cycle/core", DATASHEET, "2,048-bit vector: 128 float16 lanes"),
    "clock_mhz": Constant(1000, "MHz", DATASHEET, "AI Core clock"),
    "hbm_gbps": Constant(1200, "GB/s", DEFAULT, "HBM bandwidth (secondary sources, low confidence)"),
    "hbm_efficiency": Constant(0.7, "of peak", DEFAULT, "share of HBM bandwidth a streaming kernel reaches"),
    "host_link_gbps": Constant(32, "GB/s", DERIVED, "PCIe 4.0 x16, one direction"),
    "aicpu_cores": Constant(4, "cores", DATASHEET, "AI CPU cores"),
    "cube_efficiency": Constant(0.4066, "of peak", FITTED, "share of the cube peak a large matmul/conv reaches"),
    "vector_efficiency": Constant(0.5, "of peak", DEFAULT, "share of the vector peak vector work reaches"),
    "vector_traffic": Constant(0.0656, "of bytes", FITTED,
                               "share of a vector op's HBM reads and writes left after GE's buffer fusion keeps "
                               "chained elementwise ops' tensors in the Unified Buffer"),
    "task_overhead_us": Constant(3.0, "us", DEFAULT, "fixed cost of one AI Core task (launch, sync)"),
    "aicpu_task_us": Constant(50.0, "us", DEFAULT, "fixed cost of one AI CPU task"),
    "aicpu_gflops": Constant(2.0, "GFLOP/s", DEFAULT, "what the AI CPU computes per second for one op"),
    "aicpu_gbps": Constant(5.0, "GB/s", DEFAULT, "memory bandwidth one AI CPU op reaches"),
    "host_op_us": Constant(20.0, "us", DEFAULT, "fixed cost of one host op in a step"),
    "host_gbps": Constant(10.0, "GB/s", DEFAULT, "host memory bandwidth one host op reaches"),
    "transfer_us": Constant(15.0, "us", DEFAULT, "fixed cost of one host<->device copy"),
    "run_overhead_us": Constant(2000.0, "us", DEFAULT,
                                "one Session.run's host round trip (launch, sync, result copy), paid once per "
                                "iterations_per_loop steps"),
    "vector_block_elements": Constant(2048, "elements", DEFAULT,
                                      "elements one core's share of a vector task must have to keep it busy"),
    "cube_block_tiles": Constant(4, "16x16 tiles", DEFAULT,
                                 "output tiles one core's share of a cube task must have to keep it busy"),
    "uncertainty": Constant(0.15, "fraction", DEFAULT,
                            "the range printed around a calibrated estimate (the anchors' tolerance)"),
    "default_spread": Constant(2.0, "factor", DEFAULT,
                               "how far time resting on unmeasured defaults (AI CPU, host ops, copies, run "
                               "overhead) may be off either way: the range divides and multiplies it by this"),
}

# ModelZoo-era CANN (the 910A's) ran these on AI CPU although later AI Core libraries list them: the facts
# file's slow-down list names MirrorPad (2.6x slower than a V100 in one model).
_ERA_AICPU = frozenset({"MirrorPad", "MirrorPadGrad"})


def _variant(soc, *, cube, vector, clock, hbm, aicpu) -> Hardware:
    table = dict(TABLE_910A)
    table["cube_cores"] = Constant(cube, "cores", DATASHEET, "AI Cores running cube work (split cores)")
    table["vector_cores"] = Constant(vector, "cores", DATASHEET, "vector cores (separate from the cube cores)")
    table["clock_mhz"] = Constant(clock, "MHz", DATASHEET, "AI Core clock")
    table["hbm_gbps"] = Constant(hbm, "GB/s", DEFAULT, "HBM bandwidth (secondary sources, low confidence)")
    table["aicpu_cores"] = Constant(aicpu, "cores", DATASHEET, "AI CPU cores")
    return Hardware(soc, table, fp32_cube=True, aicpu_era_ops=frozenset())


PRESETS: dict[str, Hardware] = {
    "Ascend910A": Hardware("Ascend910A", TABLE_910A, fp32_cube=False, aicpu_era_ops=_ERA_AICPU),
    "Ascend910ProA": Hardware("Ascend910ProA", {**TABLE_910A, "clock_mhz": Constant(
        1100, "MHz", DATASHEET, "AI Core clock")}, fp32_cube=False, aicpu_era_ops=_ERA_AICPU),
    "Ascend910B1": _variant("Ascend910B1", cube=24, vector=48, clock=1850, hbm=1600, aicpu=6),
    "Ascend910B2": _variant("Ascend910B2", cube=24, vector=48, clock=1800, hbm=1600, aicpu=6),
    "Ascend910B3": _variant("Ascend910B3", cube=20, vector=40, clock=1800, hbm=1600, aicpu=6),
    "Ascend910B4": _variant("Ascend910B4", cube=20, vector=40, clock=1500, hbm=1600, aicpu=6),
}
PRESETS["Ascend910"] = PRESETS["Ascend910A"]
DEFAULT_SOC = "Ascend910A"


def hardware(soc: str | None = None, overrides: Mapping[str, float] | None = None) -> Hardware:
    """The preset of a SoC name (default Ascend910A), with constants replaced by `overrides`."""
    name = soc or DEFAULT_SOC
    if name not in PRESETS:
        raise ConfigError(f"--soc {name!r} has no preset; use one of: {', '.join(sorted(PRESETS))}")
    preset = PRESETS[name]
    return preset.with_values(**overrides) if overrides else preset
