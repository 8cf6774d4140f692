"""Which first-party distribution provides a component a configuration names, so that an error for a
name no loaded plugin registers can say what to install.

The table covers the names the bundled plugins register; ``tests/test_providers.py`` checks it against
the components the installed first-party plugins really register, so it cannot drift from them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from ora_core.kernel.distributions import installed_version

#: (kind, name) -> the first-party distribution that registers it.
FIRST_PARTY: dict[tuple[str, str], str] = {
    ("backend", "anthropic"): "ora-anthropic",
    ("backend", "local-llm"): "ora-local-llm",
    ("backend", "openai"): "ora-openai",
    ("backend", "playwright"): "ora-playwright",
    ("backend", "scripted"): "ora-scripted",
    ("embedder", "minilm"): "ora-minilm",
    ("verifier", "grounding"): "ora-grounding",
    ("verifier", "model"): "ora-broken",
}

INSTALL_COMMAND = "ora plugins install {distribution}"


def provider(kind: str, name: str) -> str | None:
    """The first-party distribution that registers ``kind`` ``name``, None when none does."""
    return FIRST_PARTY.get((kind, name))


def missing_hint(kind: str, name: str, *, plugin_status: Mapping[str, str] | None = None,
                 installed: Callable[[str], str | None] = installed_version) -> str:
    """What to do about a ``kind`` ``name`` that no loaded plugin registers: the first-party distribution
    providing it and the command installing it; when that distribution is installed, why it did not
    register the name (``plugin_status``: distribution -> the status of its plugin, e.g. ``disabled``
    or ``failed: <error>``). A name no first-party distribution provides gets the general hint."""
    distribution = provider(kind, name)
    if distribution is None:
        return (f"no first-party distribution provides {kind} {name!r}; install the plugin that does with "
                f"'{INSTALL_COMMAND.format(distribution='<distribution>')}'")
    version = installed(distribution)
    if version is None:
        return (f"{kind} {name!r} is provided by the first-party distribution {distribution}, which is not "
                f"installed: install it with '{INSTALL_COMMAND.format(distribution=distribution)}'")
    status = (plugin_status or {}).get(distribution)
    where = f"the first-party distribution {distribution} {version}, which is installed but"
    if status and status.startswith("disabled"):
        return f"{kind} {name!r} is provided by {where} its plugin is {status}"
    why = f"its plugin is {status}" if status else "its plugin is not loaded in this process"
    return (f"{kind} {name!r} is provided by {where} {why} ('ora plugins list' shows its record; to "
            f"reinstall it: '{INSTALL_COMMAND.format(distribution=distribution)} --upgrade')")


def distribution_status(host: object) -> dict[str, str]:
    """Distribution -> the status of its plugin in ``host`` (``disabled``, ``failed: <error>`` ...), from
    the host's plugin records; empty for a registry that keeps none (a test's in-process host)."""
    records = getattr(host, "records", None)
    if not isinstance(records, Mapping):
        return {}
    status: dict[str, str] = {}
    for record in records.values():
        distribution = getattr(record, "distribution", "")
        if distribution:
            errors = "; ".join(getattr(record, "errors", ()) or ())
            status[distribution] = f"{record.status}: {errors}" if errors else str(record.status)
    return status
