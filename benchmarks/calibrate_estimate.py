"""Re-fit the estimate's fitted constants to the two measured Ascend 910 throughputs and print them.

    .venv/bin/python benchmarks/calibrate_estimate.py

Builds ResNet-50 (batch 256) and BERT-Large (batch 96, sequence 128) as training graphs, estimates them with the
table's constants, fits cube_efficiency and vector_traffic (npu_sim_bridge/estimate/calibrate.py), and prints
the fitted values, each anchor's error before and after, and every constant with its source. Copy the fitted
values into npu_sim_bridge/estimate/hardware.py when they move.
"""

import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def main() -> None:
    from npu_sim_bridge.estimate import calibrate
    from npu_sim_bridge.estimate.hardware import hardware

    began = time.perf_counter()
    pairs = calibrate.anchor_steps()
    built = time.perf_counter() - began
    fitted = calibrate.fit(pairs)
    hw = hardware().with_values(**fitted)
    print(f"anchors built and estimated in {built:.0f} s; options {calibrate.MEASURED_OPTIONS}")
    print(f"{'anchor':<22}{'measured/s':>11}{'table/s':>10}{'err':>8}{'refit/s':>10}{'err':>8}")
    for anchor, step in pairs:
        again = calibrate.retime(step, hw)
        print(f"{anchor.name:<22}{anchor.samples_per_s:>11.0f}{step.samples_per_s:>10.0f}"
              f"{100 * calibrate.error(step, anchor):>7.1f}%{again.samples_per_s:>10.0f}"
              f"{100 * calibrate.error(again, anchor):>7.1f}%")
    print("\nfitted: " + ", ".join(f"{k}={v} (table {hardware()[k]})" for k, v in fitted.items()))
    print("\nconstants:")
    for row in hw.rows():
        print(f"  {row['key']:<22}{row['value']:>10g} {row['unit']:<16}{row['source']:<10}{row['doc']}")


if __name__ == "__main__":
    main()
