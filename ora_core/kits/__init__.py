"""Helper kits for plugin authors (HTTP transport, deadlines, Retry-After, phrase matching,
lazy regexes and components). They import only the kernel; plugins use them through
``ora_core.api`` and its submodules (``ora_core.api.http``, ``ora_core.api.text``)."""
