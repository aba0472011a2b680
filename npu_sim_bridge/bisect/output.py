"""Writes what bisect found: a modify_mixlist JSON (op types) and a customize_dtypes file (single nodes).

The mixlist carries one `//` comment line above each entry saying what it fixed (the modify_mixlist
reader accepts comments). Nodes go into a file in CANN's customize_dtypes format
(`name::InputDtype:float32,OutputDtype:float32`, one line each, `#` comments), which the
`customize_dtypes` option reads: a mixlist names op types only, and keeping one node of a type in
float32 while its siblings stay float16 needs a per-node setting.
"""

from __future__ import annotations

import json
import os

SECTIONS = ("black-list", "white-list")
ACTIONS = ("to-add", "to-remove")


def base_entries(modify_mixlist: str | None) -> dict:
    """{section: {action: [names]}} of the user's own modify_mixlist file (kept in every file bisect writes)."""
    entries = {section: {action: [] for action in ACTIONS} for section in SECTIONS}
    if modify_mixlist:
        from npu_sim_bridge.passes.precision.lists import load_mixlist

        mixlist = load_mixlist(modify_mixlist)
        for section in SECTIONS:
            for action in ACTIONS:
                entries[section][action].extend(mixlist.names(section, action))
    return entries


def mixlist_text(types, base: dict | None = None, comments: dict | None = None, header: str = "") -> str:
    """The modify_mixlist JSON that black-lists `types` on top of `base`, with a comment line per added type."""
    base = base or {section: {action: [] for action in ACTIONS} for section in SECTIONS}
    comments = comments or {}
    lines = []
    if header:
        lines.extend(f"// {line}" for line in header.splitlines())
    lines.append("{")
    sections = []
    for section in SECTIONS:
        actions = []
        for action in ACTIONS:
            names = list(base[section][action])
            added = [name for name in types if name not in names] if (section, action) == ("black-list", "to-add") \
                else []
            if section == "white-list" and action == "to-add":
                names = [name for name in names if name not in types]
            if not names and not added:
                continue
            items = [f"      {json.dumps(name)}" for name in names]
            for name in added:
                note = comments.get(name)
                items.append((f"      // {note}\n" if note else "") + f"      {json.dumps(name)}")
            actions.append(f"    {json.dumps(action)}: [\n" + ",\n".join(items) + "\n    ]")
        if actions:
            sections.append(f"  {json.dumps(section)}: {{\n" + ",\n".join(actions) + "\n  }")
    if not sections:
        sections.append('  "black-list": {\n    "to-add": []\n  }')
    lines.append(",\n".join(sections))
    lines.append("}")
    return "\n".join(lines) + "\n"


def customize_text(nodes, comments: dict | None = None, header: str = "") -> str:
    """A customize_dtypes file keeping `nodes` in float32, with a comment line per node."""
    comments = comments or {}
    lines = [f"# {line}" for line in header.splitlines()] if header else []
    for name in nodes:
        if comments.get(name):
            lines.append(f"# {comments[name]}")
        lines.append(f"{name}::InputDtype:float32,OutputDtype:float32")
    return "\n".join(lines) + "\n"


def customize_path(mixlist_path: str) -> str:
    """Where the node file goes next to a mixlist: mixlist.json -> mixlist.customize_dtypes.cfg."""
    stem, _ = os.path.splitext(mixlist_path)
    return stem + ".customize_dtypes.cfg"


def write(path: str, text: str) -> None:
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)
