"""A rank that misbehaves on purpose: `fault.py MODE FOLDER` (see tests/test_multirank_faults.py).

Every rank but in `chatty` mode starts a `sleep 600` child and writes "<its pid> <child pid>" to
FOLDER/rank<R>.pids, so the test can check that no process is left. Modes:
raise (rank 1 raises), sigkill (rank 1 is killed by SIGKILL), wait (every rank waits), chatty (every
rank prints 100,000 lines, then writes FOLDER/rank<R>.done), exit0 (rank 1 exits 0 at once while
rank 0 connects to it for an all-reduce), exit0_later (rank 1 exits 0 after one all-reduce while
rank 0 waits in the second).
"""

import os
import signal
import subprocess
import sys
import time

mode, folder = sys.argv[1], sys.argv[2]
rank = int(os.environ["RANK_ID"])

if mode == "chatty":
    for line in range(100_000):
        print(f"line {line} of rank {rank}")
    with open(os.path.join(folder, f"rank{rank}.done"), "w") as handle:
        handle.write("done\n")
    sys.exit(0)

child = subprocess.Popen(["sleep", "600"])
with open(os.path.join(folder, f"rank{rank}.pids.tmp"), "w") as handle:
    handle.write(f"{os.getpid()} {child.pid}\n")
os.rename(os.path.join(folder, f"rank{rank}.pids.tmp"), os.path.join(folder, f"rank{rank}.pids"))
print(f"rank {rank} started", flush=True)

def wait_for_rank0():
    """Fail only once rank 0 has started its child (so the test knows every pid)."""
    deadline = time.monotonic() + 120
    while not os.path.exists(os.path.join(folder, "rank0.pids")) and time.monotonic() < deadline:
        time.sleep(0.1)


if mode in ("exit0", "exit0_later"):
    if rank == 1 and mode == "exit0":
        wait_for_rank0()
        sys.exit(0)
    from npu_bridge.npu_init import *  # noqa: F401,F403,E402
    from npu_bridge.hccl import hccl_ops  # noqa: E402

    first = hccl_ops.allreduce(tf.constant(1.0), "sum")  # noqa: F405
    second = hccl_ops.allreduce(tf.constant(2.0), "sum")  # noqa: F405
    with tf.Session(config=npu_config_proto()) as sess:  # noqa: F405
        print("first all-reduce gives", sess.run(first), flush=True)
        if rank == 1:
            sys.exit(0)
        print("second all-reduce gives", sess.run(second))
    sys.exit(0)
if rank == 1 and mode == "raise":
    wait_for_rank0()
    raise ValueError("rank 1 fails on purpose")
if rank == 1 and mode == "sigkill":
    wait_for_rank0()
    os.kill(os.getpid(), signal.SIGKILL)
time.sleep(600)
