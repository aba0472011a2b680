"""Star imports of the simulated npu_bridge modules give the real modules' names, never the simulation's `tf`."""

import os
import subprocess
import sys
import textwrap
import types

import pytest

from npu_sim_bridge.runtime import alias, star_exports

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(autouse=True)
def no_alias_left_behind():
    alias.uninstall_alias()
    yield
    alias.uninstall_alias()


def _star(name):
    namespace = {}
    exec(f"from {name} import *", namespace)  # pylint: disable=exec-used
    del namespace["__builtins__"]
    return namespace


def test_every_simulated_module_exports_its_names_and_no_imported_module():
    alias.install_alias()
    for name in sorted(alias.MODULES):
        namespace = _star(name)
        modules = sorted(key for key, value in namespace.items() if isinstance(value, types.ModuleType))
        if name == "npu_bridge.npu_init":  # as the real npu_init: every public name, `tf` the TF 1.15 API
            assert {"tf", "util", "npu_ops", "hccl_ops", "npu_scope", "os"} <= set(modules)
            assert type(namespace["tf"]).__name__ == "TF1Module"
            continue
        assert modules == sorted(star_exports.LEAKED_MODULES.get(name, ())), name
        module = sys.modules[name]
        expected = {key for key, value in vars(module).items()
                    if not key.startswith("_") and not isinstance(value, types.ModuleType)}
        assert set(namespace) - set(star_exports.LEAKED_MODULES.get(name, ())) == expected, name
    assert "time" in _star("npu_bridge.estimator.npu.npu_estimator")  # the real module leaks it; 2 models use it
    assert "NPUEstimator" in _star("npu_bridge.estimator.npu.npu_estimator")
    assert "NPURunConfig" in _star("npu_bridge.estimator.npu.npu_config")  # a module merged from several


def test_a_new_simulated_module_gets_the_rule_without_declaring_anything(tmp_path, monkeypatch):
    (tmp_path / "fresh_runtime_module.py").write_text(textwrap.dedent("""\
        import os
        import numpy as np
        import tensorflow as tf

        def fresh_op(x):
            return tf.identity(x)
        """))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(alias.MODULES, "npu_bridge.estimator.npu.npu_fresh", ("fresh_runtime_module",))
    alias.install_alias()
    try:
        assert sorted(_star("npu_bridge.estimator.npu.npu_fresh")) == ["fresh_op"]
    finally:
        sys.modules.pop("fresh_runtime_module", None)


def test_a_leak_the_simulation_lacks_is_named(monkeypatch):
    monkeypatch.setitem(star_exports.LEAKED_MODULES, "npu_bridge.x", ("threading",))
    with pytest.raises(RuntimeError, match=r"npu_bridge.x should leak the module 'threading'.*LEAKED_MODULES"):
        star_exports.star_names("npu_bridge.x", {"f": len})


def test_script_star_importing_every_simulated_module_keeps_its_tf1_tf(tmp_path):
    """Under `npu-sim run` (the TF 1.15 view), after a star import of each simulated module, as scripts write them."""
    imports = "\n".join(f"from {name} import *" for name in
                        ["npu_bridge.npu_init"] + sorted(set(alias.MODULES) - {"npu_bridge.npu_init"}))
    script = tmp_path / "star_everything.py"
    script.write_text(f"import tensorflow as tf\nbefore = tf\n{imports}\n" + textwrap.dedent("""\
        import npu_bridge.estimator.npu.util as bridge_util
        tf.flags.DEFINE_integer("steps", 2, "steps")
        with tf.Session() as sess:
            value = sess.run(tf.contrib.layers.flatten(tf.ones([2, 3, 4])))
        print("STAR same_tf", tf is before, "type", type(tf).__name__, "steps", tf.flags.FLAGS.steps,
              "flat", value.shape, "util_kept", util is bridge_util, "time", time.__name__)
        """))
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2",
               PYTHONPATH=os.pathsep.join(filter(None, [REPO_ROOT, os.environ.get("PYTHONPATH")])))
    result = subprocess.run([sys.executable, "-m", "npu_sim_bridge", "run", str(script)], capture_output=True,
                            text=True, env=env, timeout=300, check=False)
    assert result.returncode == 0, result.stderr[-4000:]
    lines = [line for line in result.stdout.splitlines() if line.startswith("STAR ")]
    assert lines == ["STAR same_tf True type TF1Module steps 2 flat (2, 12) util_kept True time time"], \
        result.stdout[-2000:]
