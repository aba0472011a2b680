"""The shared numbers the per-node indexes hold (graph.shared_ints)."""

import threading

from npu_sim_bridge.graph import shared_ints


def test_every_index_gets_the_same_object_for_a_number():
    first = shared_ints.counting(0, 5000)
    assert first == list(range(5000))
    assert shared_ints.number(4321) is first[4321]
    assert shared_ints.counting(4000, 4100)[21] is first[4021]
    assert shared_ints.number(7000) == 7000 and shared_ints.counting(6990, 7001)[10] is shared_ints.number(7000)


def test_a_release_on_another_thread_never_gives_a_wrong_number():
    stop = threading.Event()

    def releasing():
        while not stop.is_set():
            shared_ints.release()

    thread = threading.Thread(target=releasing)
    thread.start()
    try:
        wrong = [value for value in range(0, 20000, 7) if shared_ints.number(value) != value]
        wrong += [start for start in range(0, 20000, 997) if shared_ints.counting(start, start + 300) != list(range(start, start + 300))]
    finally:
        stop.set()
        thread.join()
    assert not wrong
