"""The fusion_switch_file: which graph (GraphFusion) and UB (UBFusion) fusion rules are on or off.

Format, as the Ascend toolchain reads it:
    {"Switch": {"GraphFusion": {"ALL": "off", "MatMulBiasAddFusionPass": "on"},
                "UBFusion": {"TbeConvElemwiseFusionPass": "off"}}}
A per-rule entry overrides "ALL"; a rule named nowhere is on. Values are "on" or "off" (any case).
The file may carry // and /* */ comments and trailing commas (precision_tool's own example has one).
A missing file, invalid JSON (reported with line and column), a wrong structure or value is an error
naming the file; a rule name the simulator does not know is a warning naming it.
"""

from __future__ import annotations

import dataclasses
import difflib
import warnings

from npu_sim_bridge.config import jsonfile
from npu_sim_bridge.errors import ConfigError

SWITCH = "Switch"
GRAPH_FUSION = "GraphFusion"
UB_FUSION = "UBFusion"
SECTIONS = (GRAPH_FUSION, UB_FUSION)
ALL = "ALL"
EXAMPLE = '{"Switch": {"GraphFusion": {"ALL": "off"}, "UBFusion": {"ALL": "off"}}}'

# Fusion rules of the real toolchain that the simulator does not implement (public CANN fusion
# references); switching them is accepted and changes nothing here.
KNOWN_NOT_SIMULATED = frozenset({
    "ConvToFullyConnectionFusionPass", "SoftmaxFusionPass", "ConvConcatFusionPass", "PoolingFusionPass",
    "ZConcatv2dFusionPass", "ZConcatExt2FusionPass", "TfMergeSubFusionPass", "RequantFusionPass",
    "NotRequantFusionPass", "SplitConvConcatFusionPass", "ConvBatchnormFusionPass", "ConvScaleFusionPass",
    "AConv2dMulFusion", "Conv2DSqueezeBiasaddFusionPass", "BatchMatMulFusionPass", "AddNFusionPass",
    "FusionVirtualOpSetSwitch", "TbePool2dQuantFusionPass", "TbeEltwiseFusionPass", "TbeMultiOutputFusionPass",
    "AutomaticUbFusion", "TbeConv3dElemwisePass", "TbeDepthwiseConvElemwiseFusionPass",
    "TbeConv2DBackpropElemwiseFusionPass", "TbeDxTransdataFusionPass", "MatmulTransdataFusionPass",
    "TbeConvDequantVaddReluQuantFusionPass", "BatchMatMulV2DequantMulAddFusionPass", "TbeConvFixPipeFusionPass",
    "CastRemoveFusionPass", "DreluFusionPass", "DepthwiseFusionPass", "FlashAttentionFusionPass",
})


class FusionSwitchWarning(UserWarning):
    """A fusion_switch_file entry that changes nothing (an unknown rule, a rule that cannot be switched off)."""


@dataclasses.dataclass(frozen=True)
class RuleState:
    """Whether a rule is on, and the entry that decided it (for the report and `npu-sim fusion-rules`)."""

    on: bool
    why: str


@dataclasses.dataclass
class FusionSwitch:
    """The parsed fusion_switch_file (no file: every rule on)."""

    path: str | None = None
    sections: dict = dataclasses.field(default_factory=dict)  # section -> {name: bool}
    warnings: list = dataclasses.field(default_factory=list)

    def state(self, rule) -> RuleState:
        entries = self.sections.get(rule.kind, {})
        where = f"fusion_switch_file {self.path!r}" if self.path else ""
        if rule.name in entries:
            on, why = entries[rule.name], f"{where}: {rule.kind} {rule.name} is {_word(entries[rule.name])}"
        elif ALL in entries:
            on, why = entries[ALL], f"{where}: {rule.kind} ALL is {_word(entries[ALL])}"
        else:
            return RuleState(True, "on (default)")
        if not on and not rule.can_disable:
            return RuleState(True, f"on: {rule.name} cannot be switched off (as on the NPU; {why})")
        return RuleState(on, why)

    def check_names(self, rules) -> None:
        """Warn about entries that name no rule of their section (simulated or known), or an unswitchable one."""
        by_name = {rule.name: rule for rule in rules}
        unknown = 0
        for section, entries in self.sections.items():
            for name, on in entries.items():
                if name == ALL:
                    continue
                rule = by_name.get(name)
                if rule is None:
                    if name in KNOWN_NOT_SIMULATED:
                        continue
                    unknown += 1
                    if unknown > _DETAILED_UNKNOWN:
                        continue
                    self._warn(f"fusion_switch_file {self.path!r}: {section} names {name!r}, which is not a fusion "
                               f"rule the simulator knows; it is ignored{_close(name, by_name)} "
                               "(`npu-sim fusion-rules` lists the rules)")
                    continue
                if rule.kind != section:
                    self._warn(f"fusion_switch_file {self.path!r}: {name} is a {rule.kind} rule but is listed under "
                               f"{section}; it is ignored there, move it to {rule.kind}")
                elif not on and not rule.can_disable:
                    self._warn(f"fusion_switch_file {self.path!r}: {name} cannot be switched off (the NPU's graph "
                               "engine always applies it); it stays on")
        if unknown > _DETAILED_UNKNOWN:
            self._warn(f"fusion_switch_file {self.path!r}: {unknown - _DETAILED_UNKNOWN} more names are not fusion "
                       "rules the simulator knows and are ignored")

    def _warn(self, text: str) -> None:
        if text not in self.warnings:
            self.warnings.append(text)
            warnings.warn(text, FusionSwitchWarning, stacklevel=3)


# Unknown rule names warned one by one (with a "did you mean"); the rest are counted in one warning.
_DETAILED_UNKNOWN = 20


def _word(on: bool) -> str:
    return "on" if on else "off"


def _close(name, choices) -> str:
    match = difflib.get_close_matches(name, sorted(choices), n=1, cutoff=0.7)
    return f" (did you mean {match[0]!r}?)" if match else ""


def load_switch(path: str | None) -> FusionSwitch:
    """The switch a fusion_switch_file path gives (None or "": every rule on)."""
    if not path:
        return FusionSwitch()
    text = jsonfile.read_option_file(path, "fusion_switch_file", EXAMPLE)
    return parse_switch(text, path)


def parse_switch(text: str, path: str = "<string>") -> FusionSwitch:
    """Parse the text of a fusion_switch_file (see the module docstring)."""
    data = jsonfile.parse_option_json(text, f"fusion_switch_file {path!r}", EXAMPLE)
    if not isinstance(data, dict) or SWITCH not in data:
        raise ConfigError(f"fusion_switch_file {path!r} must hold an object with a \"Switch\" key, e.g. {EXAMPLE}")
    extra = sorted(set(data) - {SWITCH})
    if extra:
        raise ConfigError(f"fusion_switch_file {path!r}: unknown top-level key {extra[0]!r}; only \"Switch\" is read")
    body = data[SWITCH]
    if not isinstance(body, dict):
        raise ConfigError(f"fusion_switch_file {path!r}: \"Switch\" must be an object with \"GraphFusion\" and/or "
                          f"\"UBFusion\", got {type(body).__name__}")
    sections = {}
    for section, entries in body.items():
        if section not in SECTIONS:
            raise ConfigError(f"fusion_switch_file {path!r}: unknown section {section!r}{_close(section, SECTIONS)}; "
                              "the sections are \"GraphFusion\" and \"UBFusion\"")
        if not isinstance(entries, dict):
            raise ConfigError(f"fusion_switch_file {path!r}: {section} must be an object of \"RuleName\": "
                              f"\"on\"|\"off\", got {type(entries).__name__}")
        states = {}
        for name, value in entries.items():
            word = value.strip().lower() if isinstance(value, str) else None
            if word not in ("on", "off"):
                raise ConfigError(f"fusion_switch_file {path!r}: {section} {name} is {value!r}; it should be "
                                  "\"on\" or \"off\"")
            states[name.strip()] = word == "on"
        sections[section] = states
    return FusionSwitch(path=path, sections=sections)
