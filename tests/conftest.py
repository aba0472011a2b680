"""Shared test set-up: TF1 graph mode (as migrated scripts run) and graph-building helpers."""

import os
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402

import npu_sim_bridge  # noqa: E402,F401  (loads the NpuOptimizer shim)

tf.compat.v1.disable_eager_execution()


def npu_config(**params):
    """A ConfigProto naming NpuOptimizer, written the way migrated scripts write it."""
    config = tf.compat.v1.ConfigProto()
    custom_op = config.graph_options.rewrite_options.custom_optimizers.add()
    custom_op.name = "NpuOptimizer"
    for key, value in params.items():
        if isinstance(value, bool):
            custom_op.parameter_map[key].b = value
        elif isinstance(value, int):
            custom_op.parameter_map[key].i = value
        else:
            custom_op.parameter_map[key].s = tf.compat.as_bytes(value)
    return config


@pytest.fixture(name="npu_config")
def npu_config_fixture():
    return npu_config


@pytest.fixture(autouse=True, scope="session")
def _temporary_files_under_pytest(tmp_path_factory):
    """Temporary folders the code under test, its child processes and the seed scripts make (a user's
    script makes its own) go under pytest's base folder, which pytest prunes, not into /tmp for good."""
    folder = str(tmp_path_factory.mktemp("tmp"))
    saved = tempfile.tempdir, os.environ.get("TMPDIR")
    tempfile.tempdir, os.environ["TMPDIR"] = folder, folder
    yield
    tempfile.tempdir = saved[0]
    if saved[1] is None:
        os.environ.pop("TMPDIR", None)
    else:
        os.environ["TMPDIR"] = saved[1]


@pytest.fixture(autouse=True)
def fresh_reports():
    npu_sim_bridge.clear_reports()
    yield


@pytest.fixture(autouse=True, scope="session")
def _view_index_matches_its_nodedefs():
    """Every view the tests build checks, when it hands its graph over, that the op and the inputs it
    keeps per node are the NodeDefs' (a pass that set an op or an input on a NodeDef instead of through
    the view's mutators would leave the index stale and every later decision on that node wrong), and
    that it holds each node's inputs in their one form (graph.table.held_inputs)."""
    from npu_sim_bridge.graph.table import held_inputs
    from npu_sim_bridge.graph.view import GraphView

    handed_over = GraphView.to_graph_def

    def checked(self):
        graph_def = handed_over(self)
        stale = [(node.name, self.op(node.name), node.op) for node in graph_def.node if self.op(node.name) != node.op]
        assert not stale, f"the view's ops differ from the NodeDefs' (name, index, NodeDef): {stale[:5]}"
        stale = [(node.name, held, list(node.input)) for node, held in zip(graph_def.node, self._inputs)
                 if held != held_inputs(node.input)]
        assert not stale, f"the view's inputs differ from the NodeDefs' (name, index, NodeDef): {stale[:5]}"
        return graph_def

    GraphView.to_graph_def = checked
    yield
    GraphView.to_graph_def = handed_over


# The test files that start processes (the CLI, scripts, launched ranks), drive a browser or build big models
# (Keras applications, ResNet-50, BERT): marked `slow`, so that `pytest -m "not slow"` is a fast loop while
# `make test` (every test) runs them too. A new file of that kind goes on this list.
SLOW_TEST_FILES = frozenset({
    # processes
    "test_api_cli.py", "test_ascend_env.py", "test_bad_inputs.py", "test_bisect.py", "test_bisect_faults.py",
    "test_bisect_script.py", "test_check_keeps_behaviour.py", "test_cli_offline.py", "test_compare_explain.py",
    "test_compare_msaccucmp.py", "test_estimate_script.py", "test_layout_runtimes.py", "test_multirank.py",
    "test_multirank_faults.py", "test_multirank_launch.py", "test_npu_names_ops.py", "test_npu_names_script.py",
    "test_ops_info.py", "test_profiling.py", "test_runtime_alias.py", "test_runtime_star_exports.py",
    "test_tf1_contrib_rest.py", "test_tf1_families.py", "test_tf1_keras_attributes.py", "test_tf1_scripts.py",
    # browsers
    "test_browser.py", "test_picture_screenshots.py",
    # big models
    "test_dump_models.py", "test_estimate_anchors.py", "test_estimate_sweep.py", "test_layout_cpu.py",
    "test_model_sweep.py", "test_models.py", "test_partition_carry.py", "test_precision_templates.py",
})


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.path.name in SLOW_TEST_FILES:
            item.add_marker(pytest.mark.slow)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A test's captured output can hold a file name's undecodable bytes (the bad-input tests make such
    names); pytest-xdist's workers send reports as UTF-8, so those bytes travel written as `\\xff`."""
    from npu_sim_bridge.errors import printable

    outcome = yield
    report = outcome.get_result()
    report.sections = [(title, printable(text)) for title, text in report.sections]
