"""One training step's estimated time: the GeOps' ops, host ops, boundary copies and the amortised run overhead."""

from __future__ import annotations

import dataclasses

from npu_sim_bridge.estimate.hardware import Hardware
from npu_sim_bridge.estimate.ops import FREE
from npu_sim_bridge.estimate.timing import OpTime, op_time, transfer_us
from npu_sim_bridge.estimate.walk import OpRecord, Walked

UNITS = ("cube", "vector", "aicpu", "host", "transfers", "run_overhead")
GUESSED = ("aicpu", "host", "transfers", "run_overhead")  # units costed by default constants only, none fitted


@dataclasses.dataclass
class OpEstimate:
    """An op of the step with its work and time."""

    record: OpRecord
    time: OpTime

    @property
    def us(self) -> float:
        return self.time.us


@dataclasses.dataclass
class StepEstimate:
    """The estimate of one step: the total, its split by unit and by GeOp, every op, the copies and notes."""

    hw: Hardware
    batch: int | None
    iterations_per_loop: int
    ops: list
    geop_us: dict
    transfers: list          # (Boundary, us)
    run_overhead_us: float
    walked: Walked
    options: dict

    @property
    def by_unit(self) -> dict:
        """Microseconds per unit: cube, vector, aicpu, host, transfers, run_overhead."""
        split = dict.fromkeys(UNITS, 0.0)
        for item in self.ops:
            if item.record.work.unit != FREE:
                split[item.record.work.unit] += item.us
        split["transfers"] = sum(us for _, us in self.transfers)
        split["run_overhead"] = self.run_overhead_us
        return split

    @property
    def step_us(self) -> float:
        return sum(self.by_unit.values())

    @property
    def samples_per_s(self) -> float | None:
        return self.batch / (self.step_us * 1e-6) if self.batch and self.step_us else None

    @property
    def cube_flops(self) -> float:
        return sum(item.record.work.flops for item in self.ops if item.record.work.unit == "cube")

    @property
    def cube_peak_share(self) -> float:
        """The share of the cube's peak the step reaches: its cube FLOPs over (step time x peak)."""
        return self.cube_flops / (self.step_us * 1e-6 * self.hw.cube_flops) if self.step_us else 0.0

    def range_us(self) -> tuple:
        """Low and high step times. Time the fitted constants carry (cube, vector) gets the calibration's
        tolerance (`uncertainty`); time resting on unmeasured defaults (AI CPU, host ops, copies, the run
        overhead) is divided and multiplied by `default_spread`; ops whose shapes are unknown, and loops whose
        trip count is unknown, may take longer than counted (the high end adds them again, three times in loops)."""
        u, spread = self.hw["uncertainty"], self.hw["default_spread"]
        split = self.by_unit
        guessed = sum(split[unit] for unit in GUESSED)
        calibrated = self.step_us - guessed
        unsure = sum(item.us for item in self.ops if not item.record.work.static)
        low = calibrated * (1 - u) + guessed / spread
        high = calibrated * (1 + u) + guessed * spread + unsure * (3 if self.walked.loops else 1)
        return low, high


def estimate_step(walked: Walked, hw: Hardware, batch: int | None, options: dict) -> StepEstimate:
    """Time every op of a walked step on `hw` and add the copies and the per-run overhead."""
    ops = [OpEstimate(record, op_time(record.work, hw, record.width)) for record in walked.ops]
    geop_us: dict = {name: 0.0 for name in walked.geops}
    for item in ops:
        if item.record.geop is not None:
            geop_us[item.record.geop] = geop_us.get(item.record.geop, 0.0) + item.us
    loops = max(1, int(options.get("iterations_per_loop") or 1))
    # With the loop sunk (iterations_per_loop > 1) the inputs come from the device's dataset queue, filled while
    # the device computes: only the copies of tensors the graph makes on the host remain per step.
    transfers = [(b, transfer_us(b.nbytes, hw)) for b in walked.boundaries
                 if loops == 1 or b.direction == "out" or not b.fed]
    run_overhead = hw["run_overhead_us"] / loops if walked.geops else 0.0
    return StepEstimate(hw, batch, loops, ops, geop_us, transfers, run_overhead, walked, options)
