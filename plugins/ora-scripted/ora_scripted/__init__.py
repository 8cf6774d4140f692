"""A deterministic model backend: replies come from rules in the configuration.

``[backends.x] type = "scripted"`` with ``options``:

- ``rules``: a list of ``{match = "<regex>", reply = "<text>", on = "user|system|any"}``; the
  first rule whose regex matches the chosen message (default: the last user message; ``any``: the
  system message, a newline, then the last user message) wins. With ``expand = true`` the reply is
  a template of the match (``re.Match.expand``): ``\\1``, ``\\g<name>`` are the text the regex
  captured, so a scripted model can answer from what it was sent (a clock reading, a chunk, the
  prompt). A template that refers to a group the regex lacks is refused with the configuration.
- ``default``: the reply when no rule matches (default: an honest "I don't know" with a gap).
- ``replies``: a list consumed in order before the rules (a conversation script).
- ``latency_s``: simulated latency (asyncio.sleep).
- ``family``/``model`` come from the table as usual.

Declared as ``ScriptedOptions`` (the factory's ``options_model``): an unknown key, a rule without
``match``/``reply``, an ``on`` other than ``user``/``system``/``any``, a regex that does not
compile or an ``expand`` reply that is not a template of it is refused before a turn runs.

A reply of the form ``!error:<kind>`` raises the typed ``BackendError`` of that kind
(``timeout``, ``rate_limited``, ``auth``, ``session_expired``, ``unavailable``,
``bad_response``), so failure paths are tested without ever returning error text.
"""

from __future__ import annotations

from collections.abc import Callable

from ora_core import hookimpl
from ora_core.api import lazy_exports

# Imported on first use (``ora --help`` loads this plugin without its backend or pydantic).
__getattr__ = lazy_exports(__name__, {name: "backend" for name in (
    "DEFAULT_REPLY", "ERRORS", "ScriptedBackend", "ScriptedFactory", "ScriptedOptions", "ScriptedRule", "_literal")})


@hookimpl
def ora_register_backends(register: Callable[..., None]) -> None:
    from .backend import ScriptedFactory

    register(ScriptedFactory())
