"""Ora plugin: retrieval on Chroma.

Registers three retrievers (streams ``concept``, ``conversation``, ``relationship``), the
``ora vault`` commands, and the post-turn hook that indexes each exchange into conversation
memory. Vectors come from the embedder the host registers under the configured name
(``[embedding] embedder``, ``minilm`` from ora-minilm by default), asked for through
``ctx.embedder()``: this plugin imports no model and no other plugin. This module stays light:
chromadb is imported inside the functions that use it, so ``ora --help`` never pays for it.

Settings: ``[retrieval]`` (``path``, ``server_url``, ``k``, ``approved_weight``, ``streams``)
and ``[plugins.chroma]`` (see ``ora_chroma.settings.ChromaSettings``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ora_core import hookimpl

__version__ = "0.3.0"


@hookimpl
def ora_register_retrievers(register: Callable[..., None]) -> None:
    from .retrievers import ConceptRetriever, ConversationRetriever, RelationshipRetriever

    register(ConceptRetriever())
    register(ConversationRetriever())
    register(RelationshipRetriever())


@hookimpl
def ora_register_options(register: Callable[..., None]) -> None:
    from .settings import PLUGIN_NAME, ChromaSettings

    register(ChromaSettings, table=PLUGIN_NAME)


@hookimpl
def ora_register_commands(cli: Any, ora: Any) -> None:
    from .cli import register

    register(cli, ora)


@hookimpl
def ora_turn_finished(turn: Any, result: Any) -> None:
    from .conversation import index_turn

    index_turn(turn, result)
