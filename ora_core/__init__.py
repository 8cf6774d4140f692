"""Ora: multi-step LLM pipelines whose failures are never silent.

``ora_core`` has five floors, each importing only the ones beneath it (``ora_core/kernel/floors.py``
states them, ``python scripts/floors.py`` prints them): the kernel (contracts: hookspecs, plugin
loading, layers, data models, errors, configuration, the trace API), the kits for plugin authors,
the engine (the pipeline), the public API (``ora_core.api``) and the CLI (with the test fixtures of
``ora_core.testing``). Plugins and applications use ``ora_core.api`` (and ``hookimpl`` from
here) and nothing else. All behaviour comes from plugins registered through the ``ora``
entry-point group, first-party ones included.
"""

from ora_core.kernel.hookspecs import hookimpl

__version__ = "0.3.0"
__all__ = ["hookimpl", "__version__"]
