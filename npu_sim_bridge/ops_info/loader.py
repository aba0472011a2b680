"""Loads an operator library folder (every .json file in it) into an OpLibrary, with clear errors and a cache."""

import json
import re
import threading
from pathlib import Path

from npu_sim_bridge.errors import OpsInfoError
from npu_sim_bridge.ops_info.library import (
    BLACK, BFLOAT16, DTYPES_COMPILE_TIME, DTYPES_LISTED, DTYPES_NO_FLOAT_INPUT, FLOAT16, FLOAT32, GRAY,
    UNRESTRICTED, WHITE, IrEntry, OpLibrary, SupportEntry,
)

SUPPORTED_OPS_FILE = "npu_supported_ops.json"
OP_MAP_FILE = "tf_ir_op_map.json"
SPECIAL_FILES = (SUPPORTED_OPS_FILE, OP_MAP_FILE)

INSTALLED_DATA_DIR = "_ops_info_data"  # npu_sim_bridge/_ops_info_data in an installed copy

# dtype names of the op-info files -> float dtype; real CANN files write float32 as "float".
_FLOAT_NAMES = {
    "float16": FLOAT16, "fp16": FLOAT16, "half": FLOAT16,
    "float": FLOAT32, "float32": FLOAT32, "fp32": FLOAT32,
    "bfloat16": BFLOAT16, "bf16": BFLOAT16,
}
_FLAGS = {"true": WHITE, "false": BLACK}
_INPUT_KEY = re.compile(r"^input(\d+)$")
_PORT_KEY = re.compile(r"^(input|output)\d+$")
_MAP_SECTIONS = ("tf_to_ir", "not_compute", "no_op_info")
NOT_COMPUTE_KINDS = frozenset(("source", "variable", "pass_through", "control_flow", "container", "shape", "no_op"))

_cache = {}
_cache_lock = threading.Lock()


def builtin_library_path():
    """The built-in op library folder: npu_sim_bridge/_ops_info_data when installed, else <repo>/ops_info."""
    package_dir = Path(__file__).resolve().parent.parent
    installed = package_dir / INSTALLED_DATA_DIR
    if installed.is_dir():
        return installed
    checkout = package_dir.parent / "ops_info"
    if (checkout / OP_MAP_FILE).is_file():
        return checkout
    raise OpsInfoError(
        f"the built-in operator library is missing: looked for {installed} (installed package) and "
        f"{checkout} (source checkout); reinstall npu_sim_bridge or pass the path of an op library folder")


def load_library(path=None):
    """Loads the op library folder at `path` (None: the built-in one) and returns an OpLibrary.

    Every .json file in the folder is read in sorted name order. npu_supported_ops.json and
    tf_ir_op_map.json are recognised by name; all other files are op-info files and are merged, a later
    file's entry for an op replacing an earlier one. When the folder has no supported-ops or map file (a
    real CANN op library has only op-info files), the built-in ones are used. Results are cached per
    folder and file modification times.
    """
    folder = builtin_library_path() if path is None else Path(path).expanduser()
    if not folder.exists():
        raise OpsInfoError(f"operator library folder {folder} does not exist; give the folder that holds the "
                           f"op-info .json files (for example .../op_impl/built-in/ai_core/tbe/config/ascend910)")
    if not folder.is_dir():
        raise OpsInfoError(f"operator library path {folder} is not a directory; give the folder that holds "
                           f"the op-info .json files, not a file")
    folder = folder.resolve()
    json_files = _json_files(folder)
    if not json_files:
        raise OpsInfoError(f"operator library folder {folder} contains no .json files")
    names = {file.name for file in json_files}
    op_info_files = [file for file in json_files if file.name not in SPECIAL_FILES]
    if not op_info_files:
        raise OpsInfoError(f"operator library folder {folder} contains no op-info .json file (only "
                           f"{', '.join(sorted(names))}); add the op-info file, e.g. aic-ascend910-ops-info.json")

    fallbacks = []
    special = {}
    for name in SPECIAL_FILES:
        if name in names:
            special[name] = folder / name
        else:
            builtin = builtin_library_path().resolve()
            if builtin == folder or not (builtin / name).is_file():
                raise OpsInfoError(f"the built-in operator library {builtin} has no {name}; reinstall npu_sim_bridge")
            special[name] = builtin / name
            fallbacks.append(name)

    all_files = op_info_files + [special[name] for name in SPECIAL_FILES]
    key = (str(folder), tuple(_stamp(file) for file in all_files))
    with _cache_lock:
        library = _cache.get(key)
        if library is None:
            library = _build(folder, op_info_files, special, fallbacks)
            _cache[key] = library
    return library


def clear_cache():
    """Forgets every loaded library (the next load_library call reads the files again)."""
    with _cache_lock:
        _cache.clear()


def _json_files(folder):
    try:
        entries = list(folder.iterdir())
    except OSError as exc:
        raise OpsInfoError(f"cannot list operator library folder {folder}: {exc.strerror}") from exc
    return sorted((entry for entry in entries if entry.suffix.lower() == ".json" and entry.is_file()),
                  key=lambda entry: entry.name)


def _stamp(file):
    try:
        stat = file.stat()
    except OSError as exc:
        raise OpsInfoError(f"cannot read {file}: {exc.strerror}") from exc
    return (str(file), stat.st_mtime_ns, stat.st_size)


def _build(folder, op_info_files, special, fallbacks):
    ir_entries = {}
    for file in op_info_files:
        ir_entries.update(_parse_op_info(file, _read_json(file)))
    supported = _parse_supported(special[SUPPORTED_OPS_FILE], _read_json(special[SUPPORTED_OPS_FILE]))
    tf_to_ir, not_compute, no_op_info = _parse_map(special[OP_MAP_FILE], _read_json(special[OP_MAP_FILE]))
    files = list(op_info_files) + [special[name] for name in SPECIAL_FILES]
    return OpLibrary(folder, files, ir_entries, supported, tf_to_ir, not_compute, no_op_info, fallbacks)


def _read_json(file):
    try:
        text = file.read_bytes().decode("utf-8-sig")
    except OSError as exc:
        raise OpsInfoError(f"cannot read {file}: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        raise OpsInfoError(f"{file}: not UTF-8 text (byte {exc.start}: {exc.reason})") from exc
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise OpsInfoError(f"{file}: invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}") from exc


def _json_type(value):
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null",
            int: "a number", float: "a number"}.get(type(value), type(value).__name__)


def _structure_error(file, op, message):
    where = f"{file}: op {op!r}" if op is not None else str(file)
    return OpsInfoError(f"{where}: {message}")


def _parse_op_info(file, data):
    if not isinstance(data, dict):
        raise _structure_error(file, None, f"the top level must be a JSON object mapping op types to op info, "
                                           f"got {_json_type(data)}")
    entries = {}
    for op, entry in data.items():
        if not op.strip():
            raise _structure_error(file, op, "the op type name is empty")
        if not isinstance(entry, dict):
            raise _structure_error(file, op, f"the op info must be a JSON object, got {_json_type(entry)}")
        entries[op] = IrEntry(_parse_flag(file, op, entry), *_parse_float_dtypes(file, op, entry))
    return entries


def _parse_flag(file, op, entry):
    if "precision_reduce" not in entry:
        return GRAY
    reduce = entry["precision_reduce"]
    if not isinstance(reduce, dict) or "flag" not in reduce:
        raise _structure_error(file, op, 'precision_reduce must be an object like {"flag": "true"}, got '
                                         + json.dumps(reduce))
    flag = reduce["flag"]
    if isinstance(flag, bool):
        return WHITE if flag else BLACK
    if isinstance(flag, str) and flag.strip().lower() in _FLAGS:
        return _FLAGS[flag.strip().lower()]
    raise _structure_error(file, op, f'precision_reduce.flag must be "true" or "false", got {json.dumps(flag)}')


def _parse_float_dtypes(file, op, entry):
    """Float dtypes of the first input that lists one; unrestricted when undecided or no input is float."""
    inputs = []
    for key, port in entry.items():
        if not _PORT_KEY.match(key):
            continue
        if not isinstance(port, dict):
            raise _structure_error(file, op, f"{key} must be a JSON object, got {_json_type(port)}")
        if "dtype" in port and not isinstance(port["dtype"], str):
            raise _structure_error(file, op, f"{key}.dtype must be a comma-separated string such as "
                                             f'"float16,float32", got {_json_type(port["dtype"])}')
        match = _INPUT_KEY.match(key)
        if match:
            inputs.append((int(match.group(1)), port))
    for _index, port in sorted(inputs, key=lambda item: item[0]):
        if "dtype" not in port:
            return UNRESTRICTED, DTYPES_COMPILE_TIME
        names = [name.strip().lower() for name in port["dtype"].split(",") if name.strip()]
        floats = frozenset(_FLOAT_NAMES[name] for name in names if name in _FLOAT_NAMES)
        if floats:
            return floats, DTYPES_LISTED
    if not inputs:
        return UNRESTRICTED, DTYPES_COMPILE_TIME
    return UNRESTRICTED, DTYPES_NO_FLOAT_INPUT


def _parse_supported(file, data):
    if not isinstance(data, dict):
        raise _structure_error(file, None, 'the top level must be a JSON object like {"MatMul": {"isGray": '
                                           f'false, "isHeavy": false}}, got {_json_type(data)}')
    supported = {}
    for op, entry in data.items():
        if not isinstance(entry, dict):
            raise _structure_error(file, op, f'the entry must be an object like {{"isGray": false, "isHeavy": '
                                             f'false}}, got {_json_type(entry)}')
        for key in ("isGray", "isHeavy"):
            if key in entry and not isinstance(entry[key], bool):
                raise _structure_error(file, op, f"{key} must be true or false, got {json.dumps(entry[key])}")
        supported[op] = SupportEntry(entry.get("isGray", False), entry.get("isHeavy", False))
    return supported


def _parse_map(file, data):
    if not isinstance(data, dict):
        raise _structure_error(file, None, f"the top level must be a JSON object with the sections "
                                           f"{', '.join(_MAP_SECTIONS)}, got {_json_type(data)}")
    unknown = sorted(key for key in data if key not in _MAP_SECTIONS and not key.startswith("_"))
    if unknown:
        raise _structure_error(file, None, f"unknown section(s) {', '.join(unknown)}; expected "
                                           f"{', '.join(_MAP_SECTIONS)} (keys starting with _ are comments)")
    sections = {}
    for section in _MAP_SECTIONS:
        value = data.get(section, {})
        if not isinstance(value, dict):
            raise _structure_error(file, None, f"section {section} must be a JSON object, got {_json_type(value)}")
        sections[section] = value

    tf_to_ir = {}
    for op, ir_list in sections["tf_to_ir"].items():
        if (not isinstance(ir_list, list) or not ir_list
                or not all(isinstance(name, str) and name.strip() for name in ir_list)):
            raise _structure_error(file, op, "tf_to_ir entries must be non-empty arrays of IR op type names, got "
                                             + json.dumps(ir_list))
        tf_to_ir[op] = list(ir_list)
    not_compute = {}
    for op, kind in sections["not_compute"].items():
        if kind not in NOT_COMPUTE_KINDS:
            raise _structure_error(file, op, f"not_compute kind must be one of {', '.join(sorted(NOT_COMPUTE_KINDS))}, "
                                             f"got {json.dumps(kind)}")
        if op in tf_to_ir:
            raise _structure_error(file, op, "is both in tf_to_ir and in not_compute; keep it in one section")
        not_compute[op] = kind
    no_op_info = {}
    for op, note in sections["no_op_info"].items():
        if not isinstance(note, str):
            raise _structure_error(file, op, f"no_op_info entries must be strings, got {_json_type(note)}")
        if op in not_compute:
            raise _structure_error(file, op, "is both in not_compute and in no_op_info; keep it in one section")
        no_op_info[op] = note
    return tf_to_ir, not_compute, no_op_info
