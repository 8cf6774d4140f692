"""``[plugins.trace-fs]``: the sink's options, declared to the kernel (``ora_register_options``) so an
unknown key or a wrong type is refused before a turn runs."""

from __future__ import annotations

from pydantic import Field

from ora_core.api import PluginOptions

TABLE = "trace-fs"


class TraceFsOptions(PluginOptions):
    """``[plugins.trace-fs]``."""

    #: Every file flushed to the disk before the turn returns (``"turn"`` durability).
    fsync: bool = True
    #: How long a closing turn waits for the writer thread to let go of the disk; past it the turn
    #: returns with its tracing marked degraded and the writer writes the files when it can.
    close_timeout_s: float = Field(default=30.0, ge=0)
