"""Turns an NpuOptimizer parameter_map (protobuf map, dict or ConfigProto) into validated, typed, immutable Options."""

import difflib
import numbers
import os
import re
import sys
import warnings
from collections.abc import Mapping
from types import MappingProxyType

from npu_sim_bridge.errors import ConfigError
from npu_sim_bridge.config.registry import (
    DEFAULT_PRECISION_MODE,
    KEYS,
    KINDS,
    REPLACED_KEYS,
    MAX_INPUT_FUSION_SIZE,
    MIX_PRECISION_MODES,
    MIX_PRECISION_MODES_V2,
    SIM_KEYS,
    VALIDATED_ONLY_WHEN,
    env_var_name,
    one_of_text,
)

NPU_OPTIMIZER_NAME = "NpuOptimizer"

SOURCE_EXPLICIT = "explicit"
SOURCE_ENVIRONMENT = "environment"
SOURCE_DEFAULT = "default"

_ATTR_VALUE = "tensorflow.AttrValue"
_CONFIG_PROTO = "tensorflow.ConfigProto"
_REWRITER_CONFIG = "tensorflow.RewriterConfig"
_CUSTOM_OPTIMIZER = "tensorflow.RewriterConfig.CustomGraphOptimizer"

_TRUE_STRINGS = ("true", "1")
_FALSE_STRINGS = ("false", "0")
_INT_STRING = re.compile(r"[+-]?\d+")


class NpuSimConfigWarning(UserWarning):
    """A parameter_map problem that does not stop the run (an unknown key, a value the adapter ignores)."""


class Options(Mapping):
    """The effective value of every parameter_map key: what the user gave, else the environment (sim_ keys),
    else the default.

    Read-only mapping: options["precision_mode"], options.get("dump_path"). Build it with
    parse_parameter_map, from_dict, from_config_proto or from_any, which validate; the constructor does not.
    """

    __slots__ = ("_values", "_sources", "_warnings", "_unknown")

    def __init__(self, values, sources, warnings_=(), unknown=()):
        full = {name: key.default for name, key in KEYS.items()}
        full.update(values)
        object.__setattr__(self, "_values", MappingProxyType(full))
        object.__setattr__(self, "_sources", MappingProxyType(dict(sources)))
        object.__setattr__(self, "_warnings", tuple(warnings_))
        object.__setattr__(self, "_unknown", tuple(unknown))

    def __setattr__(self, name, value):
        raise AttributeError("Options is immutable; build a new one with from_dict(...) or parse_parameter_map(...)")

    def __delattr__(self, name):
        raise AttributeError("Options is immutable")

    def __getitem__(self, name):
        try:
            return self._values[name]
        except KeyError:
            raise KeyError(f"unknown option {name!r}{_suggestion(name)}") from None

    def __iter__(self):
        return iter(self._values)

    def __len__(self):
        return len(self._values)

    def __repr__(self):
        given = ", ".join(f"{name}={self._values[name]!r}" for name in self._values if name in self._sources)
        return f"Options({given})"

    @property
    def explicit(self):
        """Names of the keys the user gave in the parameter_map or dict."""
        return frozenset(name for name, source in self._sources.items() if source == SOURCE_EXPLICIT)

    @property
    def from_environment(self):
        """Names of the sim_ keys taken from NPU_SIM_* environment variables."""
        return frozenset(name for name, source in self._sources.items() if source == SOURCE_ENVIRONMENT)

    @property
    def warnings(self):
        """The warnings raised while parsing, as text."""
        return list(self._warnings)

    @property
    def unknown(self):
        """Names the parameter_map held that no known key has (ignored)."""
        return self._unknown

    def source(self, name):
        """'explicit', 'environment' or 'default'."""
        if name not in self._values:
            raise KeyError(f"unknown option {name!r}{_suggestion(name)}")
        return self._sources.get(name, SOURCE_DEFAULT)

    def to_dict(self):
        """Effective values of all keys, in registry order (JSON-friendly)."""
        return dict(self._values)

    def describe(self):
        """One dict per key the user set (explicitly or through the environment), in registry order."""
        rows = []
        for name, value in self._values.items():
            source = self._sources.get(name)
            if source is None:
                continue
            key = KEYS[name]
            if source == SOURCE_ENVIRONMENT:
                source = f"environment variable {env_var_name(name)}"
            rows.append({"name": name, "value": value, "acts": key.acts, "note": key.note, "source": source})
        return rows


# ---------------------------------------------------------------------------------------------------
# Constructors.


def parse_parameter_map(parameter_map, environ=None):
    """Options from a custom optimizer's parameter_map (protobuf map<string, AttrValue>, or a dict of AttrValue)."""
    return _parse_attr_items(parameter_map.items(), environ)


def from_dict(mapping, environ=None):
    """Options from Python values: str / bytes / bool / int (or AttrValue). None means "not set".

    Bool keys also take "true"/"false"/"1"/"0" and int keys strings of digits, as the CLI passes
    --param KEY=VALUE text.
    """
    given = {}
    unknown = []
    for name, value in mapping.items():
        name = _key_name(name)
        key = KEYS.get(name)
        if key is None:
            unknown.append(name)
        elif value is not None:
            given[name] = _from_python(key, value)
    return _build(given, unknown, environ)


def from_config_proto(config_proto, environ=None):
    """Options from the ConfigProto's custom optimizer named NpuOptimizer; None when it has none."""
    if _proto_name(config_proto) != _CONFIG_PROTO:
        raise TypeError(f"from_config_proto expects a tf.compat.v1.ConfigProto, got {type(config_proto).__name__}")
    return _from_rewriter_config(config_proto.graph_options.rewrite_options, environ)


def from_any(obj, environ=None):
    """Options from None (defaults), a dict, a ConfigProto, a RewriterConfig, a RewriterConfig.CustomGraphOptimizer,
    an estimator RunConfig (its session_config) or an Options (returned as is).

    A ConfigProto without an NpuOptimizer gives the defaults; use from_config_proto to tell the two apart.
    """
    if isinstance(obj, Options):
        return obj
    if obj is None:
        return _build({}, [], environ)
    proto = _proto_name(obj)
    if proto == _CONFIG_PROTO:
        options = from_config_proto(obj, environ)
        return options if options is not None else _build({}, [], environ)
    if proto == _REWRITER_CONFIG:
        options = _from_rewriter_config(obj, environ)
        return options if options is not None else _build({}, [], environ)
    if proto == _CUSTOM_OPTIMIZER:
        return parse_parameter_map(obj.parameter_map, environ)
    if isinstance(obj, Mapping) or (proto is None and hasattr(obj, "items")):
        return from_dict(obj, environ)
    if proto is None and hasattr(obj, "session_config"):
        return from_any(obj.session_config, environ)
    raise TypeError(
        "expected None, a dict, a ConfigProto, a RewriterConfig, a RewriterConfig.CustomGraphOptimizer, "
        f"a RunConfig or an Options, got {type(obj).__name__}")


def _from_rewriter_config(rewriter_config, environ):
    found = [custom for custom in rewriter_config.custom_optimizers if custom.name == NPU_OPTIMIZER_NAME]
    if not found:
        return None
    if len(found) == 1:
        return parse_parameter_map(found[0].parameter_map, environ)
    # The real adapter reads every NpuOptimizer entry in order; a key in a later one overrides an earlier one.
    merged = {}
    for custom in found:
        merged.update(custom.parameter_map.items())
    note = (f"the ConfigProto has {len(found)} custom optimizers named {NPU_OPTIMIZER_NAME}; their parameter_maps "
            f"are merged, a key in a later one overriding an earlier one; keep a single NpuOptimizer entry")
    return _parse_attr_items(merged.items(), environ, notes=[note])


def _parse_attr_items(items, environ, notes=()):
    given = {}
    unknown = []
    for name, attr in items:
        name = _key_name(name)
        key = KEYS.get(name)
        if key is None:
            unknown.append(name)
        else:
            given[name] = _from_attr(key, attr)
    return _build(given, unknown, environ, notes)


# ---------------------------------------------------------------------------------------------------
# Typed values.


def _proto_name(obj):
    descriptor = getattr(obj, "DESCRIPTOR", None)
    return getattr(descriptor, "full_name", None)


def _key_name(name):
    if isinstance(name, bytes):
        name = name.decode("utf-8", errors="replace")
    if not isinstance(name, str):
        raise ConfigError(f"option names must be strings, got {type(name).__name__} {name!r}")
    return name


def _from_attr(key, attr):
    if _proto_name(attr) != _ATTR_VALUE:
        raise ConfigError(f"option {key.name} must be an AttrValue, got {type(attr).__name__}")
    field = attr.WhichOneof("value")
    if field != key.kind:
        got = f".{field}" if field else "nothing (no field is set)"
        raise ConfigError(f"option {key.name} must be set with {key.field_description}, got {got}")
    if key.kind == "s":
        return _decode(key, attr.s)
    if key.kind == "b":
        return bool(attr.b)
    return int(attr.i)


def _decode(key, data):
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ConfigError(f"option {key.name} value {data!r} is not valid UTF-8 text ({error.reason})") from None


def _from_python(key, value):
    if _proto_name(value) == _ATTR_VALUE:
        return _from_attr(key, value)
    if isinstance(value, bytes):
        value = _decode(key, value)
    if key.kind == "s":
        if isinstance(value, str):
            return value
    elif key.kind == "b":
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in _TRUE_STRINGS + _FALSE_STRINGS:
            return value.strip().lower() in _TRUE_STRINGS
        # protobuf takes `.b = 1` (NPUEstimator itself writes min_group_size so); accept 0 and 1 likewise.
        if isinstance(value, numbers.Integral) and value in (0, 1):
            return bool(value)
    else:
        number = None
        if isinstance(value, numbers.Integral) and not isinstance(value, bool):
            number = int(value)
        elif isinstance(value, str) and _INT_STRING.fullmatch(value.strip()):
            number = int(value.strip())
        if number is not None and not INT64_MIN <= number <= INT64_MAX:
            raise ConfigError(f"option {key.name} value {number} does not fit the parameter_map's 64-bit integer "
                              f"(at most {INT64_MAX}); give a smaller value")
        if number is not None:
            return number
    raise ConfigError(f"option {key.name} must be {KINDS[key.kind]}{_TYPE_HINTS[key.kind]}, "
                      f"got {type(value).__name__} {value!r}")


INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1

_TYPE_HINTS = {
    "s": "",
    "b": " (True/False, or the text 'true'/'false'/'1'/'0')",
    "i": " (or a string of digits)",
}


# ---------------------------------------------------------------------------------------------------
# Validation.


# A JSON object of parameter_map keys that replace what the program sets, in every NpuOptimizer of the
# process (how `npu-sim bisect --script` runs a script in float32 and with candidate mixlists); "" unsets a key.
FORCE_ENV = "NPU_SIM_FORCE_OPTIONS"


def _forced(environ):
    """The options FORCE_ENV sets, parsed ({} when unset)."""
    import json

    text = environ.get(FORCE_ENV, "").strip()
    if not text:
        return {}
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise ConfigError(f"environment variable {FORCE_ENV} is not valid JSON ({err.msg} at column {err.colno}); "
                          'it should be an object such as {"precision_mode": "allow_fp32_to_fp16"}') from None
    if not isinstance(data, dict):
        raise ConfigError(f"environment variable {FORCE_ENV} must hold a JSON object of parameter_map keys")
    forced = {}
    for name, value in data.items():
        if name not in KEYS:
            raise ConfigError(f"environment variable {FORCE_ENV} names unknown option {name!r}{_suggestion(name)}")
        forced[name] = _with_origin(f"environment variable {FORCE_ENV}", _from_python, KEYS[name], value)
    return forced


def _build(given, unknown, environ, notes=()):
    notes = list(notes)
    for name in sorted(unknown):
        notes.append(f"unknown option {name!r} is ignored{_suggestion(name)}")

    environ = os.environ if environ is None else environ
    forced = _forced(environ)
    if forced:
        given = dict(given)
        if "precision_mode" in forced or "precision_mode_v2" in forced:  # the forced spelling replaces the other
            given.pop("precision_mode", None)
            given.pop("precision_mode_v2", None)
        for name, value in forced.items():  # an empty text unsets the option
            if value == "":
                given.pop(name, None)
            else:
                given[name] = value
    from_env = {}
    for name in SIM_KEYS:
        variable = env_var_name(name)
        text = environ.get(variable)
        if name not in given and text:  # an empty variable counts as unset
            from_env[name] = _with_origin(f"environment variable {variable}", _from_python, KEYS[name], text)

    values = {name: key.default for name, key in KEYS.items()}
    values.update(given)
    values.update(from_env)

    for name in KEYS:  # registry order, so the first error reported does not depend on map order
        if name in given:
            _check_value(name, values, notes, origin=None)
        elif name in from_env:
            _check_value(name, values, notes, origin=f"environment variable {env_var_name(name)}")

    for rule in _RULES:
        rule(values, given, notes)

    sources = {name: SOURCE_EXPLICIT for name in given}
    sources.update({name: SOURCE_ENVIRONMENT for name in from_env})
    options = Options(values, sources, notes, sorted(unknown))
    stacklevel = _stacklevel_outside_package()
    for note in notes:
        warnings.warn(note, NpuSimConfigWarning, stacklevel=stacklevel)
    return options


_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _stacklevel_outside_package():
    """The warnings.warn stacklevel, seen from the caller, that points at the first frame outside this package."""
    level = 1
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE_DIR):
        frame = frame.f_back
        level += 1
    return level


def _with_origin(origin, function, *args):
    try:
        return function(*args)
    except ConfigError as error:
        raise ConfigError(f"{origin}: {error}") from None


def _suggestion(name):
    if name in REPLACED_KEYS:
        return f"; it is not a key of the newest adapter, use {REPLACED_KEYS[name]}"
    lowered = {known.lower(): known for known in KEYS}
    if name.lower() in lowered:
        return f"; did you mean {lowered[name.lower()]}?"
    close = difflib.get_close_matches(name, list(KEYS), n=1, cutoff=0.6)
    if not close:
        close = difflib.get_close_matches(name.lower(), list(lowered), n=1, cutoff=0.6)
        close = [lowered[match] for match in close]
    if close:
        return f"; did you mean {close[0]}?"
    return "; it is not a key the NpuOptimizer reads (npu_sim_bridge.config.KEYS lists them)"


def _check_value(name, values, notes, origin):
    key = KEYS[name]
    value = values[name]
    problem = key.validate(value) if key.validate is not None else None
    if problem is None and key.allowed is not None and value not in key.allowed:
        problem = one_of_text(key.allowed)
    if problem is None:
        return
    message = f"option {name} value {value!r} is invalid, {problem}"
    gate = VALIDATED_ONLY_WHEN.get(name)
    if gate is not None and not values[gate]:
        notes.append(f"{message}; it is ignored while {gate} is off, but fix it before turning {gate} on")
        return
    raise ConfigError(f"{origin}: {message}" if origin else message)


def _check_precision_pair(values, given, notes):
    if "precision_mode" in given and "precision_mode_v2" in given:
        raise ConfigError(
            f"'precision_mode' and 'precision_mode_v2' can not be assigned at the same time (got precision_mode="
            f"{values['precision_mode']!r}, precision_mode_v2={values['precision_mode_v2']!r}); keep only one of them")


def _check_modify_mixlist(values, given, notes):
    if "modify_mixlist" not in given:
        return
    remedy = "; modify_mixlist only applies to a mix-precision mode: "
    if "precision_mode" in given:
        mode = values["precision_mode"]
        if mode not in MIX_PRECISION_MODES:
            raise ConfigError(f"modify_mixlist is set, but precision_mode is {mode!r}{remedy}set precision_mode to "
                              f"{_or_list(MIX_PRECISION_MODES)}, or remove modify_mixlist")
    elif "precision_mode_v2" in given:
        mode = values["precision_mode_v2"]
        if mode not in MIX_PRECISION_MODES_V2:
            raise ConfigError(f"modify_mixlist is set, but precision_mode_v2 is {mode!r}{remedy}set precision_mode_v2 "
                              f"to {_or_list(MIX_PRECISION_MODES_V2)}, or remove modify_mixlist")
    else:
        raise ConfigError(f"modify_mixlist is set, but no precision mode is, so the default {DEFAULT_PRECISION_MODE!r} "
                          f"applies{remedy}set precision_mode to {_or_list(MIX_PRECISION_MODES)} (or precision_mode_v2 "
                          f"to {_or_list(MIX_PRECISION_MODES_V2)}), or remove modify_mixlist")


def _or_list(names):
    return ", ".join(names[:-1]) + " or " + names[-1]


def _check_mix_compile(values, given, notes):
    if values["mix_compile_mode"] and values["iterations_per_loop"] != 1:
        raise ConfigError(
            f'"iterations_per_loop" must be 1 with "mix_compile_mode" is True (got iterations_per_loop='
            f'{values["iterations_per_loop"]}); set iterations_per_loop to 1 or turn mix_compile_mode off')
    if values["iterations_per_loop"] > 1:  # the simulation has no device loop: say what it does instead
        notes.append(
            f"iterations_per_loop={values['iterations_per_loop']}: the simulation runs one training step per "
            "Session.run (the NPU runs that many steps on the device per run, reading that many batches); "
            "loop in Python over the steps, and count each run as one step")


def _check_directory(option, path, why):
    """Raise unless path is an existing directory this process can read and write (as the adapter's CheckPath)."""
    if not path:
        raise ConfigError(f"{why} but {option} is not set; set {option} to an existing, writable directory")
    if not os.path.exists(path):
        raise ConfigError(f"{why} but {option} {path!r} does not exist; create the directory or set {option} "
                          f"to an existing one")
    if not os.path.isdir(path):
        raise ConfigError(f"{why} but {option} {path!r} is not a directory; set {option} to a directory")
    if not os.access(path, os.R_OK | os.W_OK):
        raise ConfigError(f"{why} but {option} {path!r} is not readable and writable by this process; "
                          f"fix its permissions or choose another directory")


def _check_dump_path(values, given, notes):
    enabled = [flag for flag in ("enable_dump", "enable_dump_debug") if values[flag]]
    if not enabled:
        return
    verb = "are" if len(enabled) > 1 else "is"
    _check_directory("dump_path", values["dump_path"], f"{' and '.join(enabled)} {verb} true")


def _check_work_path(values, given, notes):
    if values["aoe_mode"]:
        _check_directory("work_path", values["work_path"], f"aoe_mode is {values['aoe_mode']!r}")


def _check_implmode(values, given, notes):
    if "optypelist_for_implmode" in given and "op_select_implmode" not in given:
        raise ConfigError("optypelist_for_implmode is set without op_select_implmode; set op_select_implmode too "
                          "(or use op_precision_mode instead of both)")


def _check_dynamic_dims(values, given, notes):
    trio = ("input_shape", "dynamic_dims", "dynamic_node_type")
    present = [name for name in trio if name in given]
    hybrid = values["compile_hybrid_mode"] if "compile_hybrid_mode" in given else None
    if len(present) == len(trio):
        if hybrid is not None and hybrid not in (0, 1):
            raise ConfigError(f"option compile_hybrid_mode value {hybrid!r} is invalid, " + one_of_text((0, 1)))
        if hybrid == 1 and values["dynamic_node_type"] != 1:
            raise ConfigError("compile_hybrid_mode is 1, so dynamic_node_type must be 1 (placeholder inputs), got "
                              f"{values['dynamic_node_type']}; set dynamic_node_type to 1 or compile_hybrid_mode to 0")
    elif present:
        missing = [name for name in trio if name not in given]
        raise ConfigError(f"input_shape, dynamic_dims and dynamic_node_type must be set together; "
                          f"{', '.join(present)} set but {', '.join(missing)} not")
    elif hybrid == 1:
        raise ConfigError("compile_hybrid_mode is 1, which needs input_shape, dynamic_dims and dynamic_node_type; "
                          "set them or set compile_hybrid_mode to 0")


def _check_compress_weight(values, given, notes):
    if "enable_compress_weight" in given and "compress_weight_conf" in given:
        raise ConfigError("enable_compress_weight can not be used with compress_weight_conf; "
                          "set only one of them")


def _warn_input_fusion_size(values, given, notes):
    size = values["input_fusion_size"]
    if "input_fusion_size" in given and not 0 <= size <= MAX_INPUT_FUSION_SIZE:
        kept = min(max(size, 0), MAX_INPUT_FUSION_SIZE)
        notes.append(f"option input_fusion_size value {size} is outside 0 to {MAX_INPUT_FUSION_SIZE} bytes; "
                     f"the real adapter would use {kept}")


_RULES = (
    _check_precision_pair,
    _check_modify_mixlist,
    _check_mix_compile,
    _check_dump_path,
    _check_work_path,
    _check_implmode,
    _check_dynamic_dims,
    _check_compress_weight,
    _warn_input_fusion_size,
)
