"""The default probe pack: the probe files under the repository's ``probes/`` and, in its
``bench/`` subdirectory, the documents ``ora bench`` runs its matrix over.

It ships in the ``ora-core`` distribution but registers through the ``ora`` entry-point group
like any third-party pack, so ``ORA_DISABLE_PLUGINS=probes-default`` switches it off. It also
registers the ``bench-documents`` retriever, which serves those documents to the bench's turns
(and to nothing else: see ``ora_probes.retriever``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ora_core import hookimpl


def probes_dir() -> Path:
    here = Path(__file__).resolve().parent
    installed = here / "probes"  # a wheel install: force-included beside this module
    return installed if installed.is_dir() else here.parent / "probes"  # a source checkout


@hookimpl
def ora_register_probes(register: Callable[..., None]) -> None:
    register(probes_dir(), name="default")


@hookimpl
def ora_register_retrievers(register: Callable[..., None]) -> None:
    from .retriever import BenchDocumentsRetriever

    register(BenchDocumentsRetriever())


@hookimpl
def ora_register_options(register: Callable[..., None]) -> None:
    from .retriever import PLUGIN, ProbesDefaultOptions

    register(ProbesDefaultOptions, table=PLUGIN)
