"""What `from npu_bridge.<module> import *` gives a script: the real module's names, never its `tf`.

A simulated npu_bridge module is an npu_sim_bridge module (alias.py), and those import `tensorflow as
tf` (the real TensorFlow 2.15), `numpy as np` and helper modules of their own. Without an `__all__`
a star import would hand all of them to the script, so `from npu_bridge.estimator.npu.npu_estimator
import *` after `import tensorflow as tf` replaced the script's TF 1.15 `tf` with TensorFlow 2.15 and
the next `tf.flags` failed.

The rule, applied by the alias to every module of its MODULES table when it is first imported: a
module that defines `__all__` keeps it (npu_init does: its star import gives `tf`, the TF 1.15 API,
and the modules `util`, `npu_ops`, ... as the real npu_init's does); any other exports its public
names minus the modules it imports, plus the modules the real module is known to leak to star
imports and that scripts use (LEAKED_MODULES). A new module in MODULES gets the rule without doing
anything.
"""

import types

# Modules a real npu_bridge module hands to star imports that migrated scripts rely on. The ModelZoo
# census (shared/reference/modelzoo_npu_bridge_census.md) counts 2 models using `time` after
# `from npu_bridge.estimator.npu.npu_estimator import *`.
LEAKED_MODULES = {
    "npu_bridge.estimator.npu.npu_estimator": ("time",),
}


def public_names(namespace):
    """The names a module without `__all__` should export: public, and not an imported module."""
    return sorted(name for name, value in namespace.items()
                  if not name.startswith("_") and not isinstance(value, types.ModuleType))


def star_names(alias_name, namespace):
    """The `__all__` of the simulated module `alias_name` whose attributes are `namespace`."""
    names = set(public_names(namespace))
    for leaked in LEAKED_MODULES.get(alias_name, ()):
        if not isinstance(namespace.get(leaked), types.ModuleType):
            raise RuntimeError(f"{alias_name} should leak the module {leaked!r} to star imports, as the real "
                               f"npu_bridge does, but its simulation has no such module (LEAKED_MODULES in "
                               f"npu_sim_bridge/runtime/star_exports.py)")
        names.add(leaked)
    return sorted(names)


def set_star_names(alias_name, module):
    """Give `module` (the object sys.modules holds for `alias_name`) the `__all__` of the rule above."""
    if "__all__" not in vars(module):
        module.__all__ = star_names(alias_name, vars(module))
