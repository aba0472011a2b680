"""Reports: every decision the pipeline makes about each node, as JSON and as readable text.

model.py (the report), decisions.py and reasons.py (its node records), roles.py (what a graph is for, from its
fetches: the report's name), counts.py (the node counts, each named), views.py, picture.py and tensorboard.py
(the files beside the report), publish.py (the one step that writes what a rewrite leaves behind), summary.py
(one line per rewritten graph), history.py (the recent reports of this process).
"""

from npu_sim_bridge.report.model import NodeDecision, Report
from npu_sim_bridge.report.history import last_report, recent_reports, clear_reports

__all__ = ["NodeDecision", "Report", "last_report", "recent_reports", "clear_reports"]
