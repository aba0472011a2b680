"""The name index the view, the report and partition number nodes by: the native one and its Python
twin behave alike, and a rewrite comes out the same with either."""

import random
import re

import pytest

import npu_sim_bridge
from npu_sim_bridge.graph import name_index
from npu_sim_bridge.graph.name_index import _Twin
from npu_sim_bridge.native.loader import name_index_type


def _native():
    native = name_index_type()
    assert native is not None, "the native index loads with the shim in tests"
    return native


@pytest.fixture(params=["native", "twin"])
def make(request):
    return _native() if request.param == "native" else _Twin


def test_places_are_the_positions_names_were_appended_at(make):
    index = make(["a", "b", "c"])
    assert len(index) == 3 and index["b"] == 1 and index.get("c") == 2
    assert "a" in index and "z" not in index and 5 not in index
    assert index.get("z") is None and index.get("z", -1) == -1
    assert index.append("d") == 3
    assert list(index) == ["a", "b", "c", "d"]
    assert list(index.items()) == [("a", 0), ("b", 1), ("c", 2), ("d", 3)]
    assert list(index.values()) == [0, 1, 2, 3]
    assert index.name(2) == "c"


def test_a_removed_name_leaves_its_place_empty_until_renumbered(make):
    index = make(["a", "b", "c"])
    assert index.pop("b") == 1
    assert "b" not in index and len(index) == 2
    assert index.append("d") == 3  # the places given out keep counting
    assert list(index.items()) == [("a", 0), ("c", 2), ("d", 3)]
    with pytest.raises(IndexError):
        index.name(1)
    index.renumber()
    assert list(index.items()) == [("a", 0), ("c", 1), ("d", 2)]
    assert index.append("b") == 3 and index.name(3) == "b"


def test_bad_input_is_refused_with_the_name(make):
    index = make(["a"])
    with pytest.raises(ValueError, match="'a' is held already"):
        index.append("a")
    with pytest.raises(KeyError, match="missing"):
        index["missing"]
    with pytest.raises(KeyError):
        index.pop("missing")
    with pytest.raises(TypeError, match="node names"):
        index.append(7)
    with pytest.raises(ValueError):
        index.extend(["x", "y", "x"])


def test_a_repeated_name_is_held_once_so_the_index_is_shorter(make):
    index = make(["a", "b", "a", "c"])
    assert len(index) == 3 and set(index) == {"a", "b", "c"} and index["c"] == 3


def test_the_native_index_and_its_twin_agree_on_random_edits():
    rng = random.Random(7)
    names = [f"layer_{i // 9}/op_{i}" for i in range(3000)]
    native, twin = _native()(names[:1000]), _Twin(names[:1000])
    pending = names[1000:]
    for step in range(6000):
        choice = rng.random()
        if choice < 0.45 and pending:
            name = pending.pop()
            assert native.append(name) == twin.append(name)
        elif choice < 0.85 and len(twin):
            name = rng.choice(list(twin)) if step % 50 == 0 else next(iter(twin))
            assert native.pop(name) == twin.pop(name)
            pending.insert(0, name)  # a removed name may come back
        elif choice < 0.9:
            native.renumber()
            twin.renumber()
        name = rng.choice(names)
        assert native.get(name) == twin.get(name) and (name in native) == (name in twin)
    assert list(native.items()) == list(twin.items())
    assert len(native) == len(twin)


def test_iterating_while_renumbering_is_refused():
    index = _native()(["a", "b"])
    walk = iter(index)
    next(walk)
    index.renumber()
    with pytest.raises(RuntimeError, match="renumbered"):
        next(walk)


def test_tracemalloc_sees_the_native_index():
    """Its arrays come from Python's allocator: the traced peak that bench_scale reports counts them."""
    import tracemalloc

    names = [f"node_{i}" for i in range(20000)]
    tracemalloc.start()
    try:
        index = _native()(names)
        held = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert held >= 20000 * 8  # a pointer a name at least
    assert len(index) == 20000


def test_a_rewrite_is_the_same_with_the_native_index_and_its_twin(monkeypatch):
    """The TF1 batch-norm CNN (v1 cond on a training placeholder, UPDATE_OPS), mixed compile off and
    on: the same graph and report either way."""
    from npu_sim_bridge.testing import zoo

    assert name_index.is_native()
    graph = zoo.tf1_batchnorm_cnn().graph

    def rewritten(mix):
        graph_def, report = npu_sim_bridge.rewrite(
            graph, {"precision_mode": "allow_mix_precision", "mix_compile_mode": mix})
        records = [record.to_dict() for record in report.nodes.values()]
        return re.sub(r"GeOp\d+_", "GeOp_", f"{graph_def}\n{records}")

    native = [rewritten(False), rewritten(True)]
    monkeypatch.setattr(name_index, "name_index_type", lambda: None)
    assert not name_index.is_native()
    assert [rewritten(False), rewritten(True)] == native
    assert "'geop': 'GeOp_" in native[1]


def test_an_index_copies_and_pickles_with_its_empty_places(make):
    import copy
    import pickle

    index = make(["a", "b", "c"])
    index.pop("b")
    for again in (copy.deepcopy(index), pickle.loads(pickle.dumps(index))):
        assert list(again.items()) == [("a", 0), ("c", 2)]
        assert again.append("d") == 3


def test_a_report_copies_and_pickles():
    """A report's rows are a name index: the report still copies and pickles whole."""
    import copy
    import pickle

    from npu_sim_bridge.testing import zoo

    _, report = npu_sim_bridge.rewrite(zoo.tf1_batchnorm_cnn().graph, {"precision_mode": "allow_mix_precision"})
    assert name_index.is_native()
    for again in (copy.deepcopy(report), pickle.loads(pickle.dumps(report))):
        assert again.to_dict() == report.to_dict()
