"""Float16 round trips of loop-invariant values move out of their v1 while frame: rounded once, not per iteration.

A value a while loop reads in every iteration enters its frame through an `Enter` with `is_constant`
(an LSTM's weights and bias, in the forward loop and in the gradient loop). Where the emulation rounds
it, the round trip reads the Enter, so it runs once per iteration, on the same value each time. When
the round trip is the Enter's only reader, the two swap places: the round trip reads what the Enter
read, outside the frame, and the Enter carries the rounded value in, to the round trip's former
readers. Rounding is deterministic, so every reader gets the same bits as before; the node names,
ops and attrs stay as they were (only the edges move), and so do the report's rows. An Enter that
other nodes read as well stays where it is (they read the unrounded value), and so does its round
trip. Nested frames: the round trip moves out as far as invariant Enters read only by it lead.
"""

from __future__ import annotations

from npu_sim_bridge.graph.names import node_name, parse_input
from npu_sim_bridge.passes.precision.marks import ROUND_OP


def hoist_invariant_round_trips(view, inserted) -> int:
    """Move each float16 round trip of `inserted` (casts.Inserted) that reads a loop-invariant Enter out
    of the frame (see the module's text). Returns how many round trips moved."""
    trips = []
    for name, source, _src, _dst, kind in inserted:
        if kind != "round":
            continue
        # The node that reads the source: the rounding kernel itself, or a round trip's first Cast.
        head = name if view.op(name) == ROUND_OP else node_name(view.input_texts(name)[0])
        trips.append((name, head))
    moved = 0
    for name, head in trips:
        hoisted = False
        while _hoist_once(view, name, head):
            hoisted = True
        moved += hoisted
    return moved


def _invariant_enter(view, text: str, head: str) -> str | None:
    """The name of the Enter that input `text` of node `head` reads, when it is loop-invariant, has one
    data input and nothing else, and `head` is its only reader; else None."""
    ref = parse_input(text)
    if ref.is_control or ref.port != 0:
        return None
    enter = view.get(ref.node)
    if enter is None or enter.op != "Enter" or not enter.attr["is_constant"].b:
        return None
    inputs = view.input_texts(ref.node)
    if len(inputs) != 1 or inputs[0].startswith("^"):
        return None
    if tuple(view.consumers_of(ref.node)) != (head,):
        return None
    return ref.node


def _hoist_once(view, name: str, head: str) -> bool:
    """Swap round trip `name` (read in through `head`) with the invariant Enter it reads, if it does."""
    if head != name and tuple(view.consumers_of(head)) != (name,):
        return False  # the first Cast of the round trip has other readers inside the frame
    texts = view.input_texts(head)
    if len(texts) != 1:
        return False
    enter = _invariant_enter(view, texts[0], head)
    if enter is None:
        return False
    outside = view.input_texts(enter)[0]
    for reader in sorted(set(view.consumers_of(name))):
        for index, text in enumerate(view.input_texts(reader)):
            if node_name(text) == name:
                view.set_input(reader, index, "^" + enter if text.startswith("^") else enter)
    view.set_input(head, 0, outside)
    view.set_input(enter, 0, name)
    return True
