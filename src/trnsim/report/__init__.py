"""Reports on a finished kernel schedule: Perfetto trace, terminal summary, HTML report.

The timing model hands over a `Schedule` of `Span`s (see `trnsim.report.schedule` and
docs/profiling.md); everything here reads only that, save `profile.py`, which makes one from a timing result
with what a profile shows beside it (occupancy, hotspots, Neuron Explorer's summary figures).
"""
_WHERE = {"render_html": "html", "TraceFormatError": "perfetto", "to_trace_events": "perfetto",
          "validate_trace_events": "perfetto", "write_trace": "perfetto", "CriticalPath": "schedule",
          "Schedule": "schedule", "ScheduleError": "schedule", "Span": "schedule", "print_summary": "summary",
          "summary_dict": "summary"}
__all__ = sorted(_WHERE)


def __getattr__(name):
    """Each name imported from its module when first used (numpy only for those that need it)."""
    import importlib

    if name not in _WHERE:
        raise AttributeError(f"module 'trnsim.report' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"trnsim.report.{_WHERE[name]}"), name)
    globals()[name] = value
    return value
