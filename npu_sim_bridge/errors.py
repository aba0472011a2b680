"""Exception types: every error a user can trigger is one of these, with a message that says what to do."""


def printable(text: str) -> str:
    """`text` with each byte a file name could not decode (os.fsdecode's escapes, as in `ops_\\udcff`) written
    as `\\xff`: a message names the file as the user would type it, and prints on any terminal or log."""
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a lone surrogate that is no escaped byte
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


class NpuSimError(Exception):
    """Base class of every error npu_sim_bridge raises on purpose."""

    def __init__(self, *args):
        super().__init__(*(printable(arg) if isinstance(arg, str) else arg for arg in args))


class ConfigError(NpuSimError, ValueError):
    """A parameter_map key, value or combination of options is invalid."""


class GraphValidationError(NpuSimError):
    """A GraphDef is malformed: duplicate names, dangling inputs or an illegal cycle."""


class PassError(NpuSimError):
    """A pass of the pipeline failed; the message names the pass."""

    def __init__(self, pass_name, message):
        super().__init__(f"pass {pass_name!r} failed: {message}")
        self.pass_name = pass_name


class OpsInfoError(NpuSimError):
    """The operator library folder or one of its files is missing or malformed."""


class UnsupportedGraphError(NpuSimError):
    """The graph uses something the simulated device cannot handle."""


class NativeBuildError(NpuSimError):
    """The native NpuOptimizer shim could not be built or loaded."""
