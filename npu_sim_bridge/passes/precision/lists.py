"""The effective white/black/gray lists: the operator library's flags with a modify_mixlist file applied.

The file (seed 000) is JSON, read by config.jsonfile (comments and trailing commas allowed):
    {"black-list": {"to-add": [...], "to-remove": [...]},
     "white-list": {"to-add": [...], "to-remove": [...]}}
Rules, per op type:
- black-list to-add: the op ends black (also when white-list to-remove names it too);
- white-list to-add: the op ends white (also when black-list to-remove names it too);
- to-remove from the list the op is in, without adding it to the other list: the op ends gray;
- to-remove from a list the op is not in changes nothing (a warning says so);
- adding an op to both lists, or adding and removing it in the same list, is an error.
Names may be TensorFlow op types (MatMul) or Ascend IR op types (MatMulV2); an IR name stands for every
TF op type that becomes it. A name the library does not know is a warning naming it. A missing file,
invalid JSON (with line and column) or a wrong structure is an error naming the file.
"""

from __future__ import annotations

import dataclasses
import difflib
import warnings

from npu_sim_bridge.config import jsonfile
from npu_sim_bridge.errors import ConfigError

BLACK_LIST = "black-list"
WHITE_LIST = "white-list"
TO_ADD = "to-add"
TO_REMOVE = "to-remove"
SECTIONS = (BLACK_LIST, WHITE_LIST)
ACTIONS = (TO_ADD, TO_REMOVE)

WHITE, BLACK, GRAY = "white", "black", "gray"
_SECTION_COLOUR = {BLACK_LIST: BLACK, WHITE_LIST: WHITE}

EXAMPLE = '{"black-list": {"to-add": ["Log"]}, "white-list": {"to-remove": ["Conv2D"]}}'

# Unknown names warned one by one (with a "did you mean"); the rest are counted in one warning.
_DETAILED_UNKNOWN = 20


class MixlistWarning(UserWarning):
    """A modify_mixlist entry that is ignored (unknown op name, removal from a list the op is not in)."""


def strip_comments(text: str, path: str = "<string>") -> str:
    """`text` with // and /* */ comments blanked out; line and column of everything else unchanged."""
    return jsonfile.strip_comments(text, f"modify_mixlist file {path!r}")


@dataclasses.dataclass(frozen=True)
class Mixlist:
    """The parsed modify_mixlist file: op names per (list, action), as written."""

    path: str
    entries: dict  # (section, action) -> tuple of names

    def names(self, section: str, action: str) -> tuple[str, ...]:
        return self.entries.get((section, action), ())


def load_mixlist(path: str) -> Mixlist:
    """Read and check a modify_mixlist file; raises ConfigError naming the file on any problem."""
    text = jsonfile.read_option_file(path, "modify_mixlist file", EXAMPLE)
    return parse_mixlist(text, path)


def parse_mixlist(text: str, path: str = "<string>") -> Mixlist:
    """Parse the text of a modify_mixlist file (see the module docstring for the format)."""
    data = jsonfile.parse_option_json(text, f"modify_mixlist file {path!r}", EXAMPLE)
    if not isinstance(data, dict):
        raise ConfigError(f"modify_mixlist file {path!r} must hold a JSON object with \"black-list\" and/or "
                          f"\"white-list\", got a {_json_kind(data)}; for example {EXAMPLE}")
    entries = {}
    for section, body in data.items():
        if section not in SECTIONS:
            raise ConfigError(f"modify_mixlist file {path!r}: unknown section {section!r}{_close(section, SECTIONS)}; "
                              f"the sections are \"black-list\" and \"white-list\"")
        if not isinstance(body, dict):
            raise ConfigError(f"modify_mixlist file {path!r}: {section!r} must be an object with \"to-add\" and/or "
                              f"\"to-remove\", got a {_json_kind(body)}")
        for action, names in body.items():
            if action not in ACTIONS:
                raise ConfigError(f"modify_mixlist file {path!r}: {section} has unknown key {action!r}"
                                  f"{_close(action, ACTIONS)}; the keys are \"to-add\" and \"to-remove\"")
            if not isinstance(names, list):
                raise ConfigError(f"modify_mixlist file {path!r}: {section} {action} must be a list of op type "
                                  f"names, got a {_json_kind(names)}")
            bad = [name for name in names if not isinstance(name, str) or not name.strip()]
            if bad:
                raise ConfigError(f"modify_mixlist file {path!r}: {section} {action} must hold op type names "
                                  f"(non-empty strings), got {bad[0]!r}")
            entries[(section, action)] = tuple(name.strip() for name in names)
    return Mixlist(path, entries)


def _json_kind(value) -> str:
    return {dict: "object", list: "list", str: "string", bool: "boolean", type(None): "null"}.get(
        type(value), "number")


def _close(name, choices) -> str:
    match = difflib.get_close_matches(name, choices, n=1, cutoff=0.6)
    return f" (did you mean {match[0]!r}?)" if match else ""


@dataclasses.dataclass(frozen=True)
class Entry:
    """Where an op type ends and the rule that put it there."""

    colour: str | None
    rule: str
    changed: bool = False


class EffectiveLists:
    """The list colour of each op type after the modify_mixlist file (if any) is applied."""

    def __init__(self, library, mixlist: Mixlist | None = None):
        self.library = library
        self.mixlist = mixlist
        self.warnings: list[str] = []
        self._warned: set[str] = set()
        self._overrides: dict[str, Entry] = {}
        self._cache: dict[str, Entry] = {}
        if mixlist is not None:
            self._apply(mixlist)

    def classify(self, tf_type: str) -> Entry:
        """The colour of a TF op type (None when the library has no op info for it) and why."""
        entry = self._cache.get(tf_type)
        if entry is None:
            entry = self._overrides.get(tf_type) or self._builtin(tf_type)
            self._cache[tf_type] = entry
        return entry

    def _builtin(self, tf_type: str) -> Entry:
        info = self.library.info(tf_type)
        if info is None:
            return Entry(None, "no op info in the operator library")
        return Entry(info.flag, f"{info.flag} list")

    @property
    def overrides(self) -> dict[str, Entry]:
        """TF op type -> the entry the modify_mixlist file gave it."""
        return dict(self._overrides)

    def _apply(self, mixlist: Mixlist) -> None:
        path = mixlist.path
        wanted: dict[str, dict[tuple[str, str], str]] = {}
        unknown: list[str] = []
        for section in SECTIONS:
            for action in ACTIONS:
                for name in mixlist.names(section, action):
                    types = self.library.resolve_all(name)
                    if not types and len(unknown) >= _DETAILED_UNKNOWN:
                        unknown.append(name)
                        continue
                    if not types:
                        unknown.append(name)
                        self._warn(f"modify_mixlist file {path!r}: {section} {action} names {name!r}, which is "
                                   f"not a TensorFlow or Ascend IR op type the operator library knows; it is "
                                   f"ignored{self._suggest(name)}")
                        continue
                    for tf_type in types:
                        wanted.setdefault(tf_type, {})[(section, action)] = name
        if len(unknown) > _DETAILED_UNKNOWN:
            rest = unknown[_DETAILED_UNKNOWN:]
            self._warn(f"modify_mixlist file {path!r}: {len(rest)} more names are not op types the operator library "
                       f"knows and are ignored ({', '.join(map(repr, rest[:5]))}, ...)")
        for tf_type in sorted(wanted):
            self._decide(tf_type, wanted[tf_type], path)

    def _decide(self, tf_type: str, how: dict, path: str) -> None:
        def said(section, action):
            name = how[(section, action)]
            return f"{section} {action} ({name})" if name != tf_type else f"{section} {action}"

        for section in SECTIONS:
            if (section, TO_ADD) in how and (section, TO_REMOVE) in how:
                raise ConfigError(f"modify_mixlist file {path!r}: op {tf_type} is both in {section} to-add and "
                                  f"{section} to-remove; keep only one of them")
        if (BLACK_LIST, TO_ADD) in how and (WHITE_LIST, TO_ADD) in how:
            raise ConfigError(f"modify_mixlist file {path!r}: op {tf_type} is in black-list to-add and in "
                              "white-list to-add; an op can be in one list only, keep one of them")
        for section, other in ((BLACK_LIST, WHITE_LIST), (WHITE_LIST, BLACK_LIST)):
            if (section, TO_ADD) in how:
                rule = "modify_mixlist " + said(section, TO_ADD)
                if (other, TO_REMOVE) in how:
                    rule += ", " + said(other, TO_REMOVE)
                self._overrides[tf_type] = Entry(_SECTION_COLOUR[section], rule, changed=True)
                return
        base = self._builtin(tf_type)
        for section in SECTIONS:
            if (section, TO_REMOVE) not in how:
                continue
            colour = _SECTION_COLOUR[section]
            if base.colour == colour:
                self._overrides[tf_type] = Entry(GRAY, "modify_mixlist " + said(section, TO_REMOVE), changed=True)
            else:
                where = f"is {base.colour}" if base.colour else "has no op info"
                self._warn(f"modify_mixlist file {path!r}: {section} to-remove names {how[(section, TO_REMOVE)]!r}, "
                           f"but op {tf_type} {where}, not {colour}; it is left as it is")

    def _suggest(self, name: str) -> str:
        known = self.library.known_names()
        lowered = {k.lower(): k for k in known}
        if name.lower() in lowered:
            return f" (did you mean {lowered[name.lower()]!r}? names are case-sensitive)"
        match = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.75)
        return f" (did you mean {match[0]!r}?)" if match else ""

    def _warn(self, text: str) -> None:
        if text not in self._warned:
            self._warned.add(text)
            self.warnings.append(text)
            warnings.warn(text, MixlistWarning, stacklevel=2)


def build_lists(library, modify_mixlist: str | None) -> EffectiveLists:
    """EffectiveLists for the library and the modify_mixlist path (empty or None: built-in lists)."""
    mixlist = load_mixlist(modify_mixlist) if modify_mixlist else None
    return EffectiveLists(library, mixlist)


def explain(names, lists: EffectiveLists) -> list[dict]:
    """One row per name (TF or IR op type): the TF type, IR type, final list and the rule.

    With no names: every op type the modify_mixlist file changes, or without a file the op types of
    the built-in white and black lists.
    """
    library = lists.library
    if names:
        pairs = [(name, tf_type) for name in names for tf_type in (library.resolve_all(name) or (None,))]
    elif lists.mixlist is not None:
        pairs = [(tf_type, tf_type) for tf_type in sorted(lists.overrides)]
    else:
        pairs = [(tf_type, tf_type) for tf_type in sorted(library.mapped_tf_types())
                 if lists.classify(tf_type).colour in (WHITE, BLACK)]
    rows = []
    for name, tf_type in pairs:
        if tf_type is None:
            rows.append({"name": name, "tf_type": None, "ir_type": None, "list": None,
                         "rule": "unknown op type" + lists._suggest(name)})
            continue
        info = library.info(tf_type)
        entry = lists.classify(tf_type)
        rule = entry.rule if entry.changed or not entry.colour else \
            f"built-in {entry.rule} (precision_reduce {_flag_text(entry.colour)})"
        rows.append({"name": name, "tf_type": tf_type, "ir_type": info.ir_type if info else None,
                     "list": entry.colour, "rule": rule})
    return rows


def _flag_text(colour: str) -> str:
    return {WHITE: "true", BLACK: "false"}.get(colour, "not set")


def explain_mixlist(names, modify_mixlist: str | None = None, ops_info: str | None = None):
    """(explain() rows, warnings) for an operator library folder (None: built-in) and a mixlist file."""
    from npu_sim_bridge.ops_info import load_library

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MixlistWarning)
        lists = build_lists(load_library(ops_info), modify_mixlist)
    return explain(list(names), lists), list(lists.warnings)


def format_rows(rows: list[dict]) -> str:
    """explain() rows as an aligned text table."""
    header = ("op", "TF type", "IR type", "list", "rule")
    table = [header] + [(r["name"], r["tf_type"] or "-", r["ir_type"] or "-", r["list"] or "-", r["rule"])
                        for r in rows]
    widths = [max(len(row[i]) for row in table) for i in range(4)]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row[:4], widths)) + "  " + row[4]
             for row in table]
    return "\n".join(line.rstrip() for line in lines) + "\n"
