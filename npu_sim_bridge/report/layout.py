"""A layered (Sugiyama-style) layout of a graph, computed in Python for the HTML picture.

Layers run left to right: a node sits one layer after its latest producer; nodes without producers
(constants, variables, inputs) move next to their first consumer. Within each layer the order comes
from a few barycenter sweeps (each node near the mean position of its neighbours), which removes most
edge crossings. Cycles (v1 loops) are broken by ignoring the edges that close them. Linear in the
edges per sweep, so graphs of tens of thousands of nodes lay out in a few seconds.
"""

from __future__ import annotations

import collections

SWEEPS = 4


def layered_layout(count: int, edges: list[tuple[int, int]]) -> tuple[list[int], list[float]]:
    """(layer, position within the layer) of nodes 0..count-1 for directed edges (producer, consumer)."""
    preds = [[] for _ in range(count)]
    succs = [[] for _ in range(count)]
    for src, dst in set(edges):
        if src != dst:
            preds[dst].append(src)
            succs[src].append(dst)
    order = _acyclic_order(count, preds, succs)
    rank = {node: index for index, node in enumerate(order)}
    forward_preds = [[p for p in preds[n] if rank[p] < rank[n]] for n in range(count)]
    forward_succs = [[s for s in succs[n] if rank[s] > rank[n]] for n in range(count)]
    layer = [0] * count
    for node in order:
        if forward_preds[node]:
            layer[node] = max(layer[p] for p in forward_preds[node]) + 1
    for node in reversed(order):  # sources sit just before their first consumer
        if not forward_preds[node] and forward_succs[node]:
            layer[node] = max(0, min(layer[s] for s in forward_succs[node]) - 1)
    layers = collections.defaultdict(list)
    for node in order:
        layers[layer[node]].append(node)
    position = [0.0] * count
    for members in layers.values():
        _place(members, position)
    keys = sorted(layers)
    for sweep in range(SWEEPS):
        downward = sweep % 2 == 0
        for key in (keys if downward else reversed(keys)):
            members = layers[key]
            neighbours = forward_preds if downward else forward_succs
            members.sort(key=lambda n: (_mean(position, neighbours[n], position[n])))
            _place(members, position)
    return layer, position


def _acyclic_order(count, preds, succs) -> list[int]:
    """A topological order; where a cycle blocks, the earliest remaining node goes next."""
    pending = [len(p) for p in preds]
    ready = collections.deque(n for n in range(count) if pending[n] == 0)
    done = [False] * count
    order = []
    cursor = 0
    while len(order) < count:
        if not ready:
            while done[cursor]:
                cursor += 1
            ready.append(cursor)
            pending[cursor] = 0
        node = ready.popleft()
        if done[node]:
            continue
        done[node] = True
        order.append(node)
        for succ in succs[node]:
            if not done[succ]:
                pending[succ] -= 1
                if pending[succ] <= 0:
                    ready.append(succ)
    return order


def _mean(position, neighbours, default):
    if not neighbours:
        return default
    return sum(position[n] for n in neighbours) / len(neighbours)


def _place(members, position) -> None:
    middle = (len(members) - 1) / 2.0
    for index, node in enumerate(members):
        position[node] = index - middle


MAX_COLUMN = 40       # nodes stacked in one column; a longer layer wraps into several columns
CELL_X, CELL_Y = 90, 24
ASPECT = 1.6          # width / height the whole picture aims at (a landscape screen)


def grid_coordinates(layer: list[int], position: list[float]) -> tuple[list[float], list[float]]:
    """Pixel coordinates for a layered layout, folded like lines of text so it fits a screen.

    A layer holding more than MAX_COLUMN nodes wraps into several adjacent columns; the columns are then
    cut into bands of equal width, stacked top to bottom, with the band width chosen so that the
    picture is about ASPECT times as wide as it is tall. Deep training graphs (thousands of layers)
    so read left to right, band after band, instead of as one line thousands of columns long.
    """
    count = len(layer)
    by_layer: dict[int, list[int]] = {}
    for node in range(count):
        by_layer.setdefault(layer[node], []).append(node)
    columns: list[list[int]] = []
    for key in sorted(by_layer):
        members = sorted(by_layer[key], key=lambda n: position[n])
        for start in range(0, len(members), MAX_COLUMN):
            columns.append(members[start:start + MAX_COLUMN])
    if not columns:
        return [], []
    band_height = (max(len(column) for column in columns) + 3) * CELL_Y
    width = max(1, int(round((ASPECT * len(columns) * band_height / CELL_X) ** 0.5)))
    width = min(width, len(columns))
    xs, ys = [0.0] * count, [0.0] * count
    for index, column in enumerate(columns):
        band, offset = divmod(index, width)
        middle = band * band_height + band_height / 2.0
        for row, node in enumerate(column):
            xs[node] = float(offset * CELL_X)
            ys[node] = float(middle + (row - (len(column) - 1) / 2.0) * CELL_Y)
    return xs, ys
