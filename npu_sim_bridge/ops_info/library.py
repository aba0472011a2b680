"""Query API over a loaded operator library: TF op type -> IR op type, list colour, float dtypes, device support."""

from dataclasses import dataclass

from npu_sim_bridge.graph.op_categories import CUBE_OPS

WHITE = "white"
BLACK = "black"
GRAY = "gray"

FLOAT16 = "float16"
FLOAT32 = "float32"
BFLOAT16 = "bfloat16"

# How OpInfo.float_dtypes was decided.
DTYPES_LISTED = "listed"  # an input's dtype list names these float dtypes
DTYPES_COMPILE_TIME = "compile_time"  # the library gives no dtype list: decided at compile time
DTYPES_NO_FLOAT_INPUT = "no_float_input"  # no input lists a float dtype: nothing restricts the float data

UNRESTRICTED = frozenset((FLOAT16, FLOAT32))

# Op status values returned by OpLibrary.status().
STATUS_OP_INFO = "op_info"
STATUS_NOT_COMPUTE = "not_compute"
STATUS_NO_OP_INFO = "no_op_info"
STATUS_UNKNOWN = "unknown"

# Ops that run on the cube unit (matrix multiply and convolution, forward and backward).
CUBE_TF_TYPES = CUBE_OPS
CUBE_IR_TYPES = frozenset((
    "MatMul", "MatMulV2", "BatchMatMul", "BatchMatMulV2", "GEMM", "FullyConnection",
    "Conv2D", "Conv2DBackpropInput", "Conv2DBackpropInputD", "Conv2DBackpropFilter", "Conv2DBackpropFilterD",
    "Conv2DTranspose", "Conv2DTransposeD", "Deconvolution",
    "Conv3D", "Conv3DBackpropInput", "Conv3DBackpropInputD", "Conv3DBackpropFilter", "Conv3DBackpropFilterD",
    "Conv3DTranspose", "Conv3DTransposeD",
    "DepthwiseConv2D", "DepthwiseConv2DBackpropInput", "DepthwiseConv2DBackpropInputD",
    "DepthwiseConv2DBackpropFilter", "DepthwiseConv2DBackpropFilterD",
))


@dataclass(frozen=True)
class IrEntry:
    """One op of the op-info files: its list colour and the float dtypes its first float input takes."""

    flag: str
    float_dtypes: frozenset
    dtype_source: str


@dataclass(frozen=True)
class OpInfo:
    """What the op library says about one TF op type, through the IR op type that decides it."""

    tf_type: str
    ir_type: str
    flag: str
    float_dtypes: frozenset
    dtype_source: str = DTYPES_LISTED

    @property
    def supports_fp32(self):
        return FLOAT32 in self.float_dtypes

    @property
    def supports_fp16(self):
        return FLOAT16 in self.float_dtypes

    @property
    def supports_bf16(self):
        return BFLOAT16 in self.float_dtypes

    @property
    def is_cube(self):
        return self.tf_type in CUBE_TF_TYPES or self.ir_type in CUBE_IR_TYPES


@dataclass(frozen=True)
class SupportEntry:
    """One entry of npu_supported_ops.json."""

    is_gray: bool = False
    is_heavy: bool = False


class OpLibrary:
    """A loaded operator library. Every query is a dictionary lookup; the indexes are built once here."""

    def __init__(self, path, files, ir_entries, supported, tf_to_ir, not_compute, no_op_info, fallbacks=()):
        self._path = path
        self._files = tuple(files)
        self._fallbacks = tuple(fallbacks)
        self._ir = dict(ir_entries)
        self._supported = dict(supported)
        self._tf_to_ir = {tf_type: tuple(ir_list) for tf_type, ir_list in tf_to_ir.items()}
        self._not_compute = dict(not_compute)
        self._no_op_info = dict(no_op_info)
        self._info = {}
        for tf_type in self._tf_to_ir:
            info = self._decide(tf_type)
            if info is not None:
                self._info[tf_type] = info
        self._tf_of_ir = self._reverse_index()
        self._known = frozenset(self._tf_to_ir) | frozenset(self._ir) | frozenset(self._supported) \
            | frozenset(self._not_compute) | frozenset(self._no_op_info)

    def _decide(self, tf_type):
        for ir_type in self.ir_types(tf_type):
            entry = self._ir.get(ir_type)
            if entry is not None:
                return OpInfo(tf_type, ir_type, entry.flag, entry.float_dtypes, entry.dtype_source)
        return None

    def _reverse_index(self):
        """IR type -> TF types that can become it, the canonical one first."""
        found = {}
        for tf_type, ir_list in self._tf_to_ir.items():
            for position, ir_type in enumerate(ir_list):
                found.setdefault(ir_type, []).append((tf_type, position))

        def rank(item, ir_type):
            tf_type, position = item
            return (tf_type != ir_type, position != 0, tf_type.startswith("Resource"), tf_type)

        return {ir_type: tuple(tf for tf, _ in sorted(items, key=lambda item: rank(item, ir_type)))
                for ir_type, items in found.items()}

    # --- where it came from ---

    @property
    def path(self):
        """The folder the op-info files were read from."""
        return self._path

    @property
    def files(self):
        """Every file read, in load order (built-in fallbacks for the supported list and map included)."""
        return self._files

    @property
    def fallbacks(self):
        """Names of the files taken from the built-in library because the folder lacks them."""
        return self._fallbacks

    # --- queries ---

    def ir_types(self, tf_type):
        """IR op types the TF op type can become, in preference order (empty when none is known)."""
        ir_list = self._tf_to_ir.get(tf_type)
        if ir_list is not None:
            return ir_list
        if tf_type in self._ir:
            return (tf_type,)
        return ()

    def info(self, tf_type):
        """OpInfo of the TF op type, or None when no IR op type of it is in the library."""
        info = self._info.get(tf_type)
        if info is None and tf_type not in self._tf_to_ir and tf_type in self._ir:
            entry = self._ir[tf_type]
            info = OpInfo(tf_type, tf_type, entry.flag, entry.float_dtypes, entry.dtype_source)
            self._info[tf_type] = info
        return info

    def ir_flag(self, ir_type):
        """List colour of an IR op type of the op-info files, or None when the library lacks it."""
        entry = self._ir.get(ir_type)
        return entry.flag if entry is not None else None

    def resolve_all(self, name):
        """TF op types a TF or IR name stands for (case-sensitive), the canonical one first; () if none."""
        result = []
        if name in self._tf_to_ir:
            result.append(name)
        for tf_type in self._tf_of_ir.get(name, ()):
            if tf_type not in result:
                result.append(tf_type)
        if not result and (name in self._ir or name in self._not_compute or name in self._no_op_info
                           or name in self._supported):
            result.append(name)  # an IR op type no TF op maps to stands for itself, as info() treats it
        return tuple(result)

    def resolve(self, name):
        """Canonical TF op type for a TF or IR op type name (e.g. MatMulV2 -> MatMul), or None."""
        names = self.resolve_all(name)
        return names[0] if names else None

    def device_supported(self, tf_type, mix_compile=False):
        """True when the device can run the TF op type (npu_supported_ops.json).

        In mixed compute an op marked isGray stays on host, as in the real adapter.
        """
        entry = self._supported.get(tf_type)
        if entry is None:
            return False
        return not (mix_compile and entry.is_gray)

    def is_heavy(self, tf_type):
        """The isHeavy mark of npu_supported_ops.json (performance-sensitive op)."""
        entry = self._supported.get(tf_type)
        return entry is not None and entry.is_heavy

    def not_compute_kind(self, tf_type):
        """Kind of a TF op type that does no arithmetic (source, variable, pass_through, ...), else None."""
        return self._not_compute.get(tf_type)

    def no_op_info_note(self, tf_type):
        """Why a compute TF op type has no op-info entry, for those the map documents; else None."""
        return self._no_op_info.get(tf_type)

    def status(self, tf_type):
        """op_info, not_compute, no_op_info or unknown."""
        if self.info(tf_type) is not None:
            return STATUS_OP_INFO
        if tf_type in self._not_compute:
            return STATUS_NOT_COMPUTE
        if tf_type in self._no_op_info:
            return STATUS_NO_OP_INFO
        return STATUS_UNKNOWN

    def is_known(self, name):
        return name in self._known

    def known_names(self):
        """Every TF and IR op type name the library knows (for 'did you mean' suggestions)."""
        return self._known

    def ir_op_types(self):
        """IR op types of the op-info files."""
        return frozenset(self._ir)

    def supported_tf_types(self):
        return frozenset(self._supported)

    def mapped_tf_types(self):
        return frozenset(self._tf_to_ir)

    def counts(self):
        """Totals: ops, white, black, gray (op-info files), supported and mapped TF types, map sections."""
        flags = [entry.flag for entry in self._ir.values()]
        return {
            "ops": len(self._ir),
            "white": flags.count(WHITE),
            "black": flags.count(BLACK),
            "gray": flags.count(GRAY),
            "supported_tf_types": len(self._supported),
            "mapped_tf_types": len(self._tf_to_ir),
            "not_compute": len(self._not_compute),
            "no_op_info": len(self._no_op_info),
        }

    def __repr__(self):
        counts = self.counts()
        return (f"OpLibrary({str(self._path)!r}: {counts['ops']} ops, {counts['white']} white, "
                f"{counts['black']} black, {counts['gray']} gray)")
