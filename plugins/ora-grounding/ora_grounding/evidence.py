"""The evidence package a grounding check reads, whatever shape the caller hands in.

``package`` may be:

- a ``str`` — one evidence document;
- an object with a ``text`` attribute (``ora_core.kernel.models.Chunk``) or a mapping with a ``"text"``
  key — one chunk (its ``provenance.source``/``"source"`` and ``id`` are kept for the report);
- an object with a ``chunks`` attribute (``ora_core.kernel.models.Retrieval``, a context package) or a
  mapping with a ``"chunks"`` or ``"evidence"`` key — its chunks;
- a list or tuple of any of these — flattened, in order;
- ``None`` or an empty list — an empty package (every claim is then unsupported).

The package may also carry the question the subject answers (``EvidencePackage.prompt``, or a
mapping's ``"question"``/``"prompt"``); see ``package_question``.

Anything else is a ``VerifierError`` naming the offending type and where it sat.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict

from ora_core.api import VerifierError


class EvidenceItem(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str
    id: str = ""
    source: str = ""
    stream: str = ""


def _source_of(obj: Any) -> str:
    provenance = obj.get("provenance") if isinstance(obj, Mapping) else getattr(obj, "provenance", None)
    if isinstance(provenance, Mapping):
        return str(provenance.get("source", ""))
    if provenance is not None:
        return str(getattr(provenance, "source", ""))
    if isinstance(obj, Mapping):
        return str(obj.get("source", ""))
    return str(getattr(obj, "source", "") or "")


def _stream_of(obj: Any) -> str:
    provenance = obj.get("provenance") if isinstance(obj, Mapping) else getattr(obj, "provenance", None)
    if isinstance(provenance, Mapping):
        return str(provenance.get("stream", "") or "")
    return str(getattr(provenance, "stream", "") or "") if provenance is not None else ""


def _collect(obj: Any, where: str, out: list[EvidenceItem], depth: int) -> None:
    if depth > 6:
        raise VerifierError(f"evidence package nests too deeply at {where}")
    if obj is None:
        return
    if isinstance(obj, str):
        out.append(EvidenceItem(text=obj, id=where))
        return
    if isinstance(obj, Mapping):
        if isinstance(obj.get("text"), str):
            out.append(EvidenceItem(text=obj["text"], id=str(obj.get("id", where)), source=_source_of(obj),
                                    stream=_stream_of(obj)))
            return
        for key in ("chunks", "evidence"):
            if key in obj:
                _collect(obj[key], f"{where}.{key}", out, depth + 1)
                return
        raise VerifierError(
            f"evidence package: the mapping at {where} has none of the keys 'text', 'chunks', "
            f"'evidence' (keys: {', '.join(map(str, list(obj)[:8])) or 'none'})"
        )
    text = getattr(obj, "text", None)
    if isinstance(text, str):
        out.append(EvidenceItem(text=text, id=str(getattr(obj, "id", where)), source=_source_of(obj),
                                stream=_stream_of(obj)))
        return
    chunks = getattr(obj, "chunks", None)
    if chunks is not None and not callable(chunks):
        _collect(list(chunks), f"{where}.chunks", out, depth + 1)
        return
    if isinstance(obj, list | tuple):
        for i, item in enumerate(obj):
            _collect(item, f"{where}[{i}]", out, depth + 1)
        return
    raise VerifierError(
        f"evidence package: cannot read {type(obj).__name__} at {where}; pass a str, a list of "
        "chunk texts, Chunk objects, or an object with .chunks"
    )


def package_question(package: Any) -> str:
    """The question the subject answers, when the package carries it: ``EvidencePackage.prompt``
    (the turn's cleaned prompt), or a mapping's ``"question"`` / ``"prompt"``; else ``""``."""
    if isinstance(package, Mapping):
        value = package.get("question") or package.get("prompt")
    else:
        value = getattr(package, "prompt", None)
    return value.strip() if isinstance(value, str) else ""


def normalise_package(package: Any) -> list[EvidenceItem]:
    """The package as a flat list of evidence items with non-blank text."""
    items: list[EvidenceItem] = []
    _collect(package, "package", items, 0)
    return [item for item in items if item.text.strip()]
