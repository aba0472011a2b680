"""The one reader of the JSON files options name (modify_mixlist, fusion_switch_file).

Every option file is read the same way: `//` and `/* */` comments and trailing commas are
allowed, a key twice in one object is an error, and files past MAX_FILE_BYTES or nested deeper
than MAX_DEPTH are refused before parsing, so reading takes time linear in the file's size and
every problem is a ConfigError naming the file (with line and column where there is one).
"""

from __future__ import annotations

import itertools
import json
import os
import re

from npu_sim_bridge.errors import ConfigError

# Strings first, so that "//" or "/*" inside a string is never taken for a comment or a comma.
_COMMENT_TOKENS = re.compile(r'"(?:\\.|[^"\\\n])*"|//[^\n]*|/\*(?:.*?\*/|.*)', re.S)
# Far above any real option file (the largest real lists hold a few thousand names).
MAX_FILE_BYTES = 4 << 20
MAX_DEPTH = 32
_STRINGS = re.compile(r'"(?:\\.|[^"\\\n])*"')
_NOT_BRACKETS = re.compile(r"[^\[\]{}]+")
_TRAILING_COMMA_TOKENS = re.compile(r'"(?:\\.|[^"\\\n])*"|,(?=\s*[}\]])')


def text_position(text: str, offset: int) -> tuple[int, int]:
    """1-based (line, column) of `offset` in `text`."""
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1


def read_option_file(path: str, what: str, example: str) -> str:
    """The text of the file an option names; `what` says which ("modify_mixlist file")."""
    if not os.path.exists(path):
        raise ConfigError(f"{what} {path!r} does not exist; set it to the path of a JSON file such as "
                          f"{example}")
    if os.path.isdir(path):
        raise ConfigError(f"{what} {path!r} is a directory; set it to the path of a JSON file")
    size = os.path.getsize(path)
    if size > MAX_FILE_BYTES:
        raise ConfigError(f"{what} {path!r} has {size} bytes, more than the {MAX_FILE_BYTES} an option file may "
                          f"have; is it the right file? An option file lists op or rule names, such as {example}")
    try:
        with open(path, encoding="utf-8-sig") as handle:
            return handle.read()
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError(f"{what} {path!r} cannot be read ({err}); make it a readable UTF-8 JSON "
                          "file") from None


def strip_comments(text: str, what: str = "JSON file '<string>'") -> str:
    """`text` with // and /* */ comments blanked out; line and column of everything else unchanged."""

    def blank(match):
        token = match.group(0)
        if token.startswith('"'):
            return token
        if token.startswith("/*") and not token.endswith("*/"):
            line, column = text_position(text, match.start())
            raise ConfigError(f"{what}: a /* comment opened at line {line}, column {column} is never "
                              "closed; close it with */")
        return re.sub(r"[^\n]", " ", token)

    return _COMMENT_TOKENS.sub(blank, text)


def strip_trailing_commas(text: str) -> str:
    """`text` with commas before a closing } or ] blanked out (positions unchanged)."""
    return _TRAILING_COMMA_TOKENS.sub(lambda m: m.group(0) if m.group(0).startswith('"') else " ", text)


def load_option_json(path: str, what: str, example: str):
    """The JSON value in the option file at `path` (comments and trailing commas allowed)."""
    return parse_option_json(read_option_file(path, what, example), f"{what} {path!r}", example)


def parse_option_json(text: str, what: str, example: str):
    """The JSON value in `text`; `what` names the file in errors ("modify_mixlist file 'x.json'")."""
    if len(text) > MAX_FILE_BYTES:
        raise ConfigError(f"{what} has {len(text)} characters, more than the {MAX_FILE_BYTES} an option file may "
                          f"have; an option file lists op or rule names, such as {example}")
    cleaned = strip_trailing_commas(strip_comments(text, what))
    depth = nesting_depth(cleaned)
    if depth > MAX_DEPTH:
        raise ConfigError(f"{what} nests objects and lists {depth} levels deep, more than the {MAX_DEPTH} allowed; "
                          f"an option file is a shallow object such as {example}")
    try:
        return json.loads(cleaned, object_pairs_hook=_reject_duplicates(what))
    except json.JSONDecodeError as err:
        raise ConfigError(f"{what} is not valid JSON: {err.msg} at line {err.lineno}, column {err.colno}; fix the "
                          f"file (comments and trailing commas are allowed), for example {example}") from None


def nesting_depth(text: str) -> int:
    """How deeply objects and lists nest in JSON `text` (brackets inside strings do not count)."""
    brackets = _NOT_BRACKETS.sub("", _STRINGS.sub("", text))
    if not brackets:
        return 0
    return max(itertools.accumulate(1 if char in "[{" else -1 for char in brackets))


def _reject_duplicates(what):
    def hook(pairs):
        seen = {}
        for key, value in pairs:
            if key in seen:
                raise ConfigError(f"{what}: key {key!r} appears twice in one object; merge the two entries")
            seen[key] = value
        return seen
    return hook
