"""`--param KEY=VALUE` pairs, as the subcommands that take parameter_map options read them."""

from __future__ import annotations

from npu_sim_bridge.cli.errors import UsageError


def parse_params(pairs: list[str]) -> dict[str, str]:
    """{key: value} of the pairs; a pair without '=' or without a key is a usage error naming it."""
    params: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"--param expects KEY=VALUE, got {pair!r}")
        params[key.strip()] = value
    return params
