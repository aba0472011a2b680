"""A comparison written as msaccucmp's result_*.csv files, so spreadsheets and scripts made for the tool read it.

Columns, as the tool names them: Index, OpType, NPUDump, DataType, Address, GroundTruth, DataType,
TensorIndex, Shape, CosineSimilarity, MaxAbsoluteError, AccumulatedRelativeError,
RelativeEuclideanDistance, KullbackLeiblerDivergence, StandardDeviation, MeanAbsoluteError,
RootMeanSquareError, MaxRelativeError, MeanRelativeError, CompareFailReason.

"My output" (NPUDump) is DUMP_B, the dump under test; "ground truth" is DUMP_A, the reference. With y
the ground truth and x my output, over the positions where both are finite:
  AccumulatedRelativeError   sum(|x - y| / |y|) over |y| > float32 eps
  RelativeEuclideanDistance  sqrt(sum((x - y)^2)) / sqrt(sum(y^2))
  KullbackLeiblerDivergence  sum(P log(P / Q)), P and Q each tensor scaled to [0, 1] by its min and max
                             (floored at float32 eps) and divided by its sum; P from y, Q from x
  StandardDeviation          "(mean;std)" of my output, then of the ground truth
  Max/MeanRelativeError      max and mean of |x - y| / |y| over |y| > float32 eps
Address is "NaN": a simulated dump has no device memory address. One file per graph and step:
result_<time>.csv when there is one, else <device>_<graph>_<step>_result_<time>.csv (device 0).
"""

from __future__ import annotations

import csv
import io
import os
import time

import numpy as np

from npu_sim_bridge.dumps.compare import CompareResult

COLUMNS = ("Index", "OpType", "NPUDump", "DataType", "Address", "GroundTruth", "DataType", "TensorIndex", "Shape",
           "CosineSimilarity", "MaxAbsoluteError", "AccumulatedRelativeError", "RelativeEuclideanDistance",
           "KullbackLeiblerDivergence", "StandardDeviation", "MeanAbsoluteError", "RootMeanSquareError",
           "MaxRelativeError", "MeanRelativeError", "CompareFailReason")
METRICS = COLUMNS[9:19]
_EPS = float(np.finfo(np.float32).eps)
NAN = "NaN"


def tool_metrics(ground_truth: np.ndarray, my_output: np.ndarray) -> dict[str, str]:
    """msaccucmp's metrics of one tensor pair, as the strings its CSV holds."""
    y = np.asarray(ground_truth, dtype=np.float64).ravel()
    x = np.asarray(my_output, dtype=np.float64).ravel()
    finite = np.isfinite(x) & np.isfinite(y)
    x, y = x[finite], y[finite]
    if x.size == 0:
        return {name: NAN for name in METRICS}
    diff = np.abs(x - y)
    norm_x, norm_y = np.linalg.norm(x), np.linalg.norm(y)
    cosine = float(np.dot(x, y) / (norm_x * norm_y)) if norm_x and norm_y else (1.0 if norm_x == norm_y else 0.0)
    usable = np.abs(y) > _EPS
    relative = diff[usable] / np.abs(y[usable])
    return {
        "CosineSimilarity": _number(cosine),
        "MaxAbsoluteError": _number(diff.max()),
        "AccumulatedRelativeError": _number(relative.sum()),
        "RelativeEuclideanDistance": _number(np.sqrt((diff ** 2).sum()) / norm_y) if norm_y else NAN,
        "KullbackLeiblerDivergence": _number(_kl(y, x)),
        "StandardDeviation": f"({x.mean():.3f};{x.std():.3f}),({y.mean():.3f};{y.std():.3f})",
        "MeanAbsoluteError": _number(diff.mean()),
        "RootMeanSquareError": _number(np.sqrt((diff ** 2).mean())),
        "MaxRelativeError": _number(relative.max()) if relative.size else NAN,
        "MeanRelativeError": _number(relative.mean()) if relative.size else NAN,
    }


def _distribution(values: np.ndarray) -> np.ndarray:
    span = values.max() - values.min()
    scaled = (values - values.min()) / span if span else values.copy()
    scaled = np.maximum(scaled, _EPS)
    return scaled / scaled.sum()


def _kl(ground_truth: np.ndarray, my_output: np.ndarray) -> float:
    p, q = _distribution(ground_truth), _distribution(my_output)
    return float(np.sum(p * np.log(p / q)))


def _number(value) -> str:
    value = float(value)
    return f"{value:.6f}" if np.isfinite(value) else NAN


def write_result_csvs(result: CompareResult, folder: str) -> list[str]:
    """Write msaccucmp's result_*.csv files for `result` into `folder` (each atomically); returns their paths."""
    from npu_sim_bridge.fileio import write_atomic

    os.makedirs(folder, exist_ok=True)
    stamp = time.strftime("%Y%m%d%H%M%S")
    jobs = [(pair, step) for pair in result.pairs for step in pair.steps]
    written = []
    for pair, step in jobs:
        name = f"result_{stamp}.csv" if len(jobs) == 1 else f"0_{pair.a.graph_id}_{step}_result_{stamp}.csv"
        path = os.path.join(folder, name)
        write_atomic(path, _csv_text(pair, step), "--msaccucmp file")
        written.append(path)
    return written


def _csv_text(pair, step: int) -> str:
    entries_a = {(e["op"], e["io"], e["slot"]): e for e in pair.a.tensors}
    entries_b = {(e["op"], e["io"], e["slot"]): e for e in pair.b.tensors}
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(COLUMNS)
    for index, row in enumerate(row for row in pair.rows if row.step == step):
        key = (row.op, row.io, row.slot)
        ea, eb = entries_a.get(key), entries_b.get(key)
        values = {name: NAN for name in METRICS}
        reason = ""
        if row.cosine is not None and ea is not None and eb is not None:
            values = tool_metrics(pair.a.load(step, ea), pair.b.load(step, eb))
        else:
            reason = row.status
        writer.writerow([
            index, row.type_b or row.type, row.op if eb else NAN, eb["dtype"] if eb else NAN, NAN,
            row.op if ea else NAN, ea["dtype"] if ea else NAN, f"{row.op}:{row.io}:{row.slot}",
            _shape(row.shape), *[values[name] for name in METRICS], reason])
    return out.getvalue()


def _shape(text: str) -> str:
    """'2x3' -> '[2, 3]' as the tool writes shapes; other texts (a mismatch, a scalar) unchanged."""
    if text and all(part.isdigit() for part in text.split("x")):
        return "[" + ", ".join(text.split("x")) + "]"
    return "[]" if text == "scalar" else text or NAN
