"""Reports on a finished kernel schedule: Perfetto trace, terminal summary, HTML report.

The timing model hands over a `Schedule` of `Span`s (see `trnsim.report.schedule` and
docs/profiling.md); everything here reads only that.
"""
from trnsim.report.html import render_html
from trnsim.report.perfetto import TraceFormatError, to_trace_events, validate_trace_events, write_trace
from trnsim.report.schedule import CriticalPath, Schedule, ScheduleError, Span
from trnsim.report.summary import print_summary, summary_dict

__all__ = ["CriticalPath", "Schedule", "ScheduleError", "Span", "TraceFormatError", "print_summary",
           "render_html", "summary_dict", "to_trace_events", "validate_trace_events", "write_trace"]
