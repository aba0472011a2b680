"""tf.contrib.quantize.python.graph_matcher: find subgraphs of a TF1 graph by op-type patterns.

OpTypePattern('Conv2D|MatMul', name='layer', inputs=['*', OpTypePattern('Const')]) matches an op of
one of those types whose inputs match the input patterns (in order, or in any order with
ordered_inputs=False; no inputs given: any inputs). OneofPattern tries its patterns in turn.
GraphMatcher(pattern).match_graph(graph) yields a MatchResult per op the pattern matches;
get_op / get_tensor give what a pattern (or its name) matched.
"""

import abc
import itertools


class Pattern(metaclass=abc.ABCMeta):
    """A pattern over an op (and the tensor of it that is being read)."""

    @abc.abstractmethod
    def match(self, op, tensor):
        """A MatchResult when `op` (read as `tensor`) matches, else None."""


class OpTypePattern(Pattern):
    """An op whose type is op_type ('*': any; 'A|B': either), with inputs matching `inputs` when given."""

    def __init__(self, op_type, name=None, inputs=None, ordered_inputs=True):
        self._op_type = op_type
        self._name = name
        self._inputs = [item if isinstance(item, Pattern) else OpTypePattern(item) for item in (inputs or [])]
        self._ordered = ordered_inputs

    @property
    def name(self):
        return self._name

    def match(self, op, tensor):
        if self._op_type != "*" and op.type not in self._op_type.split("|"):
            return None
        result = MatchResult()
        result.add(self, op, tensor)
        if not self._inputs:
            return result
        if len(op.inputs) != len(self._inputs):
            return None
        orders = [self._inputs] if self._ordered else itertools.permutations(self._inputs)
        for patterns in orders:
            found = MatchResult()
            found.merge_from(result)
            for input_tensor, pattern in zip(op.inputs, patterns):
                matched = pattern.match(input_tensor.op, input_tensor)
                if matched is None:
                    break
                found.merge_from(matched)
            else:
                return found
        return None


class OneofPattern(Pattern):
    """The first of `sub_patterns` that matches."""

    def __init__(self, sub_patterns):
        self._sub_patterns = list(sub_patterns)

    def match(self, op, tensor):
        for pattern in self._sub_patterns:
            result = pattern.match(op, tensor)
            if result is not None:
                return result
        return None


class MatchResult:
    """What each pattern of a match matched: get_op(pattern or name), get_tensor(pattern or name)."""

    def __init__(self):
        self._matched = {}
        self._by_name = {}

    def add(self, pattern, op, tensor):
        self._matched[pattern] = (op, tensor)
        name = getattr(pattern, "name", None)
        if name is not None:
            if self._by_name.get(name, pattern) is not pattern:
                raise ValueError(f"graph_matcher: the name {name!r} is given to two patterns; names must be unique")
            self._by_name[name] = pattern

    def merge_from(self, other):
        for pattern, (op, tensor) in other._matched.items():  # pylint: disable=protected-access
            self.add(pattern, op, tensor)

    def _entry(self, pattern_or_name):
        if isinstance(pattern_or_name, Pattern):
            return self._matched.get(pattern_or_name)
        if isinstance(pattern_or_name, str):
            pattern = self._by_name.get(pattern_or_name)
            return None if pattern is None else self._matched.get(pattern)
        raise ValueError(f"graph_matcher: expected a Pattern or a pattern name, got {pattern_or_name!r}")

    def get_op(self, pattern_or_name):
        entry = self._entry(pattern_or_name)
        return None if entry is None else entry[0]

    def get_tensor(self, pattern_or_name):
        entry = self._entry(pattern_or_name)
        return None if entry is None else entry[1]


class GraphMatcher:
    """Finds the ops of a graph that `pattern` matches."""

    def __init__(self, pattern):
        self._pattern = pattern

    def match_op(self, op):
        """A MatchResult for `op` (its first output as the tensor), or None."""
        return self._pattern.match(op, op.outputs[0] if op.outputs else None)

    def match_ops(self, ops):
        for op in ops:
            result = self.match_op(op)
            if result is not None:
                yield result

    def match_graph(self, graph):
        yield from self.match_ops(graph.get_operations())


def graph_matcher_names():
    return {name: globals()[name] for name in ("Pattern", "OpTypePattern", "OneofPattern", "MatchResult",
                                                "GraphMatcher")}
