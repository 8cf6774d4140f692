"""The kernel: hookspecs, plugin loading, layers, data models, errors, configuration, trace API.

It imports nothing of the floors above it (``ora_core.kits``, ``ora_core.engine``,
``ora_core.cli``); plugins and applications reach it through ``ora_core.api``.
"""
