"""Ora's kernel: hookspecs, plugin loading, data models, configuration, trace API, pipeline.

The kernel has no detector, backend, retriever, verifier or sink of its own: all behaviour
comes from plugins registered through the ``ora`` entry-point group.
"""

from ora_core.kernel.hookspecs import hookimpl

__version__ = "0.1.0"
__all__ = ["hookimpl", "__version__"]
