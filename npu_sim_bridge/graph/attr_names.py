"""Every attribute name this package writes or reads by name: the `_npu_sim_*` attrs the passes leave on nodes,
the scope attrs of npu_scope, and the marks it sets on Python objects. One place, so that a reader finds
who writes an attr and who reads it by grepping one constant. (The C++ shim, native/npu_optimizer.cc,
keeps its own copies of SEEN_ATTR and OPTIONS_ATTR and names this module beside them.)
"""

# Prefix of every attr the passes add; rules that copy a node's private attrs leave these behind.
PREFIX = "_npu_sim"

# --------------------------------------------------------------------------- node attrs the passes write
SEEN_ATTR = "_npu_sim_seen"                # bool: the pipeline processed this node (later Grappler iterations)
OPTIONS_ATTR = "_npu_sim_options"          # on the GeOp function body: the options it was rewritten with
GEOP_ATTR = "_npu_sim_geop"                # on a GeOp call node: the name of its GeOp
IN_GEOP_ATTR = "_npu_sim_in_geop"          # on a function body node: the GeOp that runs it
GEOP_STUB_ATTR = "_npu_sim_geop_stub"      # on a node that keeps the name of a node now inside a GeOp
SEGMENT_ATTR = "_npu_sim_segment"          # in the TensorBoard copy: the device segment of a node
DUMP_ATTR = "_npu_sim_dump"                # on an instrumented GeOp call: its dump folder
PRECISION_ATTR = "_npu_sim_precision"      # "<mode>:<execution>" on every node the precision pass inserted or retyped
INSERTED_ATTR = "_npu_sim_inserted"        # on the Casts (and rounding kernels) the precision pass inserted
ORIG_PREFIX = "_npu_sim_orig_"             # + a type attr's name: its value before the precision pass changed it
FUSION_ATTR = "_npu_sim_fusion"            # list(string): the fusion rules that made the node, in order
FUSED_FROM_ATTR = "_npu_sim_fused_from"    # list(string): "<name>:<op>" of the original nodes a fused node replaces
CONTROL_HUB_ATTR = "_npu_sim_control_hub"  # on every control hub: how many nodes read it

# --------------------------------------------------------------------------- scope attrs (runtime/scopes.py)
KEEP_DTYPE_ATTR = "_keep_dtype"                    # keep_dtype_scope: precision never changes the node's dtype
WITHOUT_NPU_COMPILE_ATTR = "_without_npu_compile"  # without_npu_compile_scope: mix_compile_mode keeps it on the host
DO_NOT_REMOVE_ATTR = "_grappler_do_not_remove"     # set with it: Grappler's own optimizers keep the node

# --------------------------------------------------------------------------- TensorFlow's attrs the passes read
XLA_MUST_COMPILE_ATTR = "_XlaMustCompile"  # on a call or a FunctionDef: XLA compiles it whole (jit_compile=True)
XLA_COMPILE_ATTR = "_XlaCompile"           # on a FunctionDef: XLA compiles it (auto-clustering's older mark)

# --------------------------------------------------------------------------- marks on Python objects
PROFILER_MARK = "_npu_sim_profiler"        # on Session.run: the profiling wrapper is installed
HOOKS_MARK = "_npu_sim_hooks"              # on a wrapped __init__: the session hooks are installed
DISTRIBUTED_MARK = "_npu_sim_distributed"  # on an optimizer: already wrapped for all-reduce
ASCEND_ENV_MARK = "_npu_sim_ascend_env"    # on a logging handler the ASCEND_* variables added
# Keys in the __dict__ of the module objects tf1compat builds.
VIEW_REAL_KEY = "_npu_sim_real"            # a PythonView's real module
VIEW_BASE_KEY = "_npu_sim_base"            # an overlay module's base
VIEW_LAZY_KEY = "_npu_sim_lazy"            # an overlay module's names computed on first use
VIEW_ROOT_KEY = "_npu_sim_root"            # the root module an attribute chain is walked from
CONTRIB_SHORT_NAME_KEY = "_npu_sim_short_name"  # a tf.contrib module's name under tf.contrib
CONTRIB_BASES_KEY = "_npu_sim_bases"       # the modules a tf.contrib module takes its names from
