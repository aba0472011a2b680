"""`python -m npu_sim_bridge` runs the npu-sim command line."""

import sys

from npu_sim_bridge.cli.main import main

sys.exit(main())
