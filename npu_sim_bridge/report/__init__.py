"""Reports: every decision the pipeline makes about each node, as JSON and as readable text."""

from npu_sim_bridge.report.model import NodeDecision, Report
from npu_sim_bridge.report.history import last_report, recent_reports, clear_reports

__all__ = ["NodeDecision", "Report", "last_report", "recent_reports", "clear_reports"]
