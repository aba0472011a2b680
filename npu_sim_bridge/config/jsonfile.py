"""Reading the JSON files options name (modify_mixlist, fusion_switch_file): comments, errors with positions."""

from __future__ import annotations

import os
import re

from npu_sim_bridge.errors import ConfigError

# Strings first, so that "//" or "/*" inside a string is never taken for a comment or a comma.
_COMMENT_TOKENS = re.compile(r'"(?:\\.|[^"\\\n])*"|//[^\n]*|/\*(?:.*?\*/|.*)', re.S)
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
