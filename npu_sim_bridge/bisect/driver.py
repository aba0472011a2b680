"""bisect: from a model accurate in float32 and broken under mixed precision, the op types (then nodes) to keep float32.

Steps, each a run of the model (a target: graph.GraphTarget or script.ScriptTarget):
1. the reference: the model with every op in its own dtype except the NPU's float16-only ops
   (precision_mode allow_fp32_to_fp16: must_keep_origin_dtype where the device allows it); it must run
   and give finite numbers;
2. the mixed run (the user's mixed mode, default allow_mix_precision); both runs dump the device ops
   and the mixed one records float16 overflow, which orders the candidates (guidance.py);
   candidates are the nodes that run float16 there, could run float32, and their op types;
3. search.smallest_fix over op types (a trial black-lists them through modify_mixlist), then, per
   culprit type with more than one node, over its nodes (a trial keeps them through customize_dtypes):
   when fewer nodes than all of the type's are enough, the nodes replace the type.
A trial is good when the error (outcome.relative_error) is at most rtol.
"""

from __future__ import annotations

import math
import os
import sys
import tempfile

from npu_sim_bridge.bisect import guidance as guide_mod
from npu_sim_bridge.bisect import output
from npu_sim_bridge.bisect.outcome import BisectError, Fix, Trial, relative_error
from npu_sim_bridge.bisect.result import BisectResult
from npu_sim_bridge.bisect.search import Oracle, smallest_fix
from npu_sim_bridge.fileio import write_atomic

REFERENCE_MODE = "allow_fp32_to_fp16"
DEFAULT_MIXED = {"precision_mode": "allow_mix_precision"}
_FLOAT16 = ("float16", "bfloat16")


def stderr_progress(text: str) -> None:
    print(f"npu-sim bisect: {text}", file=sys.stderr, flush=True)


def mixed_setting(params: dict) -> dict:
    """The precision option of the mixed runs: the user's, if a mixed mode, else allow_mix_precision."""
    from npu_sim_bridge.config.registry import MIX_PRECISION_MODES, MIX_PRECISION_MODES_V2

    if params.get("precision_mode_v2"):
        mode = params["precision_mode_v2"]
        if mode not in MIX_PRECISION_MODES_V2:
            raise BisectError(f"precision_mode_v2={mode}: bisect needs a mixed mode ({', '.join(MIX_PRECISION_MODES_V2)})"
                              ", where modify_mixlist applies")
        return {"precision_mode_v2": mode}
    mode = params.get("precision_mode") or "allow_mix_precision"
    if mode not in MIX_PRECISION_MODES:
        raise BisectError(f"precision_mode={mode}: bisect needs a mixed mode ({', '.join(MIX_PRECISION_MODES)}), "
                          "where modify_mixlist applies; the float32 reference is allow_fp32_to_fp16")
    return {"precision_mode": mode}


def _work_folder(workdir: str | None) -> str:
    """The folder for the runs' files: `workdir` (created if missing), else a new temporary one."""
    if not workdir:
        return tempfile.mkdtemp(prefix="npu_sim_bisect_")
    try:
        os.makedirs(workdir, exist_ok=True)
    except OSError as err:
        raise BisectError(f"the work folder {workdir!r} cannot be created ({err.strerror or err}); "
                          "name a folder you can write") from None
    return workdir


class Bisector:
    """One bisect session over a target; `run()` returns a BisectResult."""

    def __init__(self, target, params: dict | None = None, rtol: float = 1e-2, guided: bool = True,
                 progress=stderr_progress, workdir: str | None = None):
        if not (rtol > 0 and math.isfinite(rtol)):
            raise BisectError(f"--rtol {rtol}: give a positive tolerance, e.g. 0.01")
        self.target, self.rtol, self.guided = target, rtol, guided
        self.params = dict(params or {})
        self.mixed = mixed_setting(self.params)
        self.progress = progress or (lambda text: None)
        self.workdir = _work_folder(workdir)
        self.base = output.base_entries(self.params.get("modify_mixlist"))
        self.result = BisectResult(target=target.describe(), rtol=rtol, mixed=self.mixed,
                                   mixed_params={"modify_mixlist": self.params.get("modify_mixlist", "")},
                                   workdir=self.workdir)
        self.reference = None
        self.last_outcomes: dict = {}       # Fix -> (Outcome, Trial)
        self.candidates_by_name: dict = {}
        self.ordered: list = []
        self.overflowed: set = set()

    # ------------------------------------------------------------------ runs
    def _run(self, stage: str, overrides: dict, fix: Fix = Fix()):
        self.result.runs += 1
        outcome = self.target.run(overrides)
        if stage == "reference":
            return outcome
        error, note = relative_error(self.reference.values, outcome.values) if not outcome.failure else \
            (math.inf, f"the run failed: {outcome.failure}")
        trial = Trial(stage, fix, error, error <= self.rtol, note)
        self.result.trials.append(trial)
        self.progress(f"run {self.result.runs} ({stage}): {fix.label}: error {error:.3g}"
                      f"{' (good)' if trial.good else ''}{'; ' + note if note else ''}")
        return outcome, trial

    def _fix_overrides(self, fix: Fix) -> dict:
        overrides = dict(self.mixed)
        index = len(self.result.trials)
        if fix.types or any(self.base[s][a] for s in output.SECTIONS for a in output.ACTIONS):
            path = os.path.join(self.workdir, f"trial_{index}.mixlist.json")
            output.write(path, output.mixlist_text(fix.types, self.base))
            overrides["modify_mixlist"] = path
        if fix.nodes:
            path = os.path.join(self.workdir, f"trial_{index}.customize_dtypes.cfg")
            output.write(path, output.customize_text(self._expand(fix.nodes)))
            overrides["customize_dtypes"] = path
        return overrides

    def _expand(self, nodes) -> list[str]:
        """The nodes, each with the other nodes of the fused op it belongs to (they run as one op)."""
        found = []
        for name in nodes:
            info = self.candidates_by_name.get(name)
            for member in (name,) + (info.fused_with if info else ()):
                if member not in found:
                    found.append(member)
        return found

    def trial(self, stage: str, fix: Fix) -> bool:
        outcome, trial = self._run(stage, self._fix_overrides(fix), fix)
        self.last_outcomes[fix] = (outcome, trial)
        return trial.good

    # ------------------------------------------------------------------ steps
    def run(self) -> BisectResult:
        reference_dump = os.path.join(self.workdir, "dump_float32")
        mixed_dump = os.path.join(self.workdir, "dump_mixed")
        probe = self.guided
        overrides = {"precision_mode": REFERENCE_MODE, "modify_mixlist": "", "customize_dtypes": ""}
        if probe:
            overrides.update(guide_mod.dump_overrides(reference_dump, overflow=False))
        self.progress(f"run 1: the float32 reference ({REFERENCE_MODE}: float16 only where the NPU has no "
                      "float32 kernel)")
        self.reference = self._run("reference", overrides)
        self._check_reference(self.reference)
        self.result.reference_values = self.reference.values
        overrides = self._fix_overrides(Fix())
        if probe:
            overrides.update(guide_mod.dump_overrides(mixed_dump, overflow=True))
        mixed, trial = self._run("mixed", overrides)
        self.result.error_before = trial.error
        if trial.good:
            self.result.message = (f"the mixed run is already within rtol {self.rtol:g} of float32 (error "
                                   f"{trial.error:.3g}); nothing to keep in float32")
            return self.result
        candidates, float16_only = self._candidates(mixed)
        self.candidates_by_name = {node.name: node for node in candidates}
        self.result.float16_only = float16_only
        if not candidates:
            raise BisectError(self._no_candidates(trial, float16_only))
        guidance = guide_mod.read_guidance(reference_dump, mixed_dump, self.rtol) if probe else None
        if guidance is not None:
            self.result.guidance = guidance
            if guidance.note:
                self.progress(guidance.note)
        ordered = self.ordered = guide_mod.order_nodes(candidates, guidance)
        self.overflowed = set(guidance.overflow) if guidance is not None else set()
        types = list(dict.fromkeys(node.op for node in ordered))
        self.result.candidate_nodes = [node.name for node in ordered]
        self.result.node_types = {node.name: node.op for node in ordered}
        self.result.candidate_types = types
        self.progress(f"{len(ordered)} candidate node(s) of {len(types)} op type(s), most suspect first: "
                      f"{', '.join(types[:8])}{' ...' if len(types) > 8 else ''}")
        culprit_types = self._search_types(types)
        fix = self._search_nodes(culprit_types, ordered)
        self._finish(fix, candidates)
        return self.result

    def _check_reference(self, outcome) -> None:
        import numpy as np

        if outcome.failure:
            raise BisectError(f"the model does not run in float32 ({REFERENCE_MODE}): {outcome.failure}")
        if not outcome.values:
            raise BisectError("the float32 run gave no value to compare")
        for index, value in enumerate(outcome.values):
            array = np.asarray(value, dtype=np.float64)
            if not np.all(np.isfinite(array)):
                raise BisectError(f"float32 itself is broken: value {index} of the reference run ({REFERENCE_MODE}) "
                                  f"holds nan/inf ({int((~np.isfinite(array)).sum())} of {array.size}); bisect "
                                  "looks for float16 problems only, so fix the float32 model first")

    def _candidates(self, mixed):
        from npu_sim_bridge.ops_info import load_library

        library = load_library(self.params.get("sim_ops_info_path") or None)
        candidates, float16_only = [], []
        for node in mixed.nodes.values():
            if node.dtype_before != "float32" or node.dtype_after not in _FLOAT16 or node.op == "Cast":
                continue
            if node.placement == "host" or node.list is None:
                continue
            info = library.info(node.op)
            if info is not None and not info.supports_fp32:
                float16_only.append(node.name)
                continue
            candidates.append(node)
        return candidates, float16_only

    def _no_candidates(self, trial, float16_only) -> str:
        text = (f"the mixed run's error is {trial.error:.3g} (rtol {self.rtol:g}) but no op that could run float32 "
                "runs float16 there")
        if float16_only:
            text += f"; only float16-only ops do ({', '.join(float16_only[:5])}), which no mixlist can change"
        return text

    def _search_types(self, types) -> list[str]:
        oracle = Oracle(lambda chosen: self.trial("types", Fix(types=chosen)))
        if not oracle(types[:1]) and len(types) > 1 and not oracle(types):
            last = self.result.trials[-1]
            raise BisectError(
                f"even with every candidate op type in float32 ({', '.join(types)}) the error is {last.error:.3g} > "
                f"rtol {self.rtol:g}{'; ' + last.note if last.note else ''}. The difference does not come from "
                "ops a mixlist can keep in float32"
                + (f" (float16-only ops: {', '.join(self.result.float16_only[:5])})" if self.result.float16_only
                   else "") + "; raise --rtol or look at the dump compare")
        if len(types) == 1 and not oracle(types):
            raise BisectError(f"keeping {types[0]} in float32 leaves error {self.result.trials[-1].error:.3g} > rtol "
                              f"{self.rtol:g}; raise --rtol or look at the dump compare")
        flagged = {node.op for node in self.ordered if node.name in self.overflowed}
        found = smallest_fix(types, oracle, suspects=_leading(types, flagged))
        self.progress(f"op types that must stay float32: {', '.join(found)}")
        return found

    def _search_nodes(self, culprit_types, ordered) -> Fix:
        kept_types, kept_nodes = list(culprit_types), []
        for op_type in culprit_types:
            nodes = [node.name for node in ordered if node.op == op_type]
            if len(nodes) < 2:
                continue
            others = [t for t in kept_types if t != op_type]
            oracle = Oracle(lambda chosen: self.trial("nodes", Fix(types=tuple(others),
                                                                   nodes=tuple(kept_nodes) + chosen)))
            oracle.remember(nodes, True)  # every node of the type in float32 is what the type search found good
            found = smallest_fix(nodes, oracle, suspects=_leading(nodes, self.overflowed))
            if len(found) < len(nodes):
                kept_types.remove(op_type)
                kept_nodes.extend(found)
                self.progress(f"{op_type}: {len(found)} of its {len(nodes)} node(s) are enough: {', '.join(found)}")
        return Fix(types=tuple(kept_types), nodes=tuple(kept_nodes))

    def _finish(self, fix: Fix, candidates) -> None:
        known = self.last_outcomes.get(fix)
        if known is None:
            known = (self._run("final", self._fix_overrides(fix), fix))
        outcome, trial = known
        self.result.fix = fix
        self.result.expanded_nodes = self._expand(fix.nodes)
        self.result.error_after = trial.error
        self.result.fixed_values = outcome.values
        self.result.stayed_float16 = sorted(
            name for name, node in outcome.nodes.items()
            if name in self.candidates_by_name and node.dtype_after in _FLOAT16)
        if not trial.good:
            raise BisectError(f"the fix found ({fix.label}) leaves error {trial.error:.3g} > rtol {self.rtol:g} when "
                              "applied together; the ops interact: raise --rtol or bisect again with its mixlist")


def _leading(items, flagged) -> int:
    """How many of the first items are flagged (at least 1)."""
    count = 0
    while count < len(items) and items[count] in flagged:
        count += 1
    return max(count, 1)


def write_outputs(result: BisectResult, path: str) -> list[str]:
    """Write the mixlist (and the customize_dtypes file when nodes were needed); returns the paths written."""
    base = output.base_entries(result.mixed_params.get("modify_mixlist")) if result.mixed_params else None
    header = (f"written by npu-sim bisect for {result.target}: error {result.error_before:.3g} -> "
              f"{result.error_after:.3g} (rtol {result.rtol:g})")
    comments = result.comments()
    node_path = output.customize_path(path)
    note = (f"\nsingle nodes kept float32 ({', '.join(result.fix.nodes)}) are in {os.path.basename(node_path)}: "
            "set the option customize_dtypes to it as well") if result.fix.nodes else ""
    write_atomic(path, output.mixlist_text(result.fix.types, base, comments, header + note), "mixlist")
    written = [path]
    if result.fix.nodes:
        write_atomic(node_path, output.customize_text(result.expanded_nodes, comments, header), "customize_dtypes file")
        written.append(node_path)
    return written
