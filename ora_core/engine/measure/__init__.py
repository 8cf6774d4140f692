"""Measuring Ora from its own traces: probes (``ora probe``) and the reliability bench (``ora bench``).

Everything here reads its figures back from the files a turn left on disk (``tracefiles``), never
from the in-memory result of the run, so a figure is only as good as the trace that holds it.
"""
