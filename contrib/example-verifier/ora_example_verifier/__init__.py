"""A worked example of an Ora verifier: citations must point at evidence that exists.

An answer that cites ``[source: notes/gears.md]`` claims the package held that note. A model
that invents a citation produces exactly the internally coherent wrongness review cannot see.
This verifier checks every ``[source: …]`` citation in the subject against the provenance of
the chunks in the evidence package:

- every cited source is in the package → ``PASS``;
- any cited source is not → ``FAIL``, listing each invented citation;
- a package it cannot read → it raises ``VerifierError`` (the kernel records ``BROKEN``, never
  ``PASS``).

What makes it an Ora verifier: a unique ``name`` and ``verify(subject, package, criteria, ctx)
-> Verdict``. It declares no layer; a verifier that relied on a property of its input would
declare ``layer``/``assumes`` like a detector and be checked the same way.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any

from ora_core import hookimpl
from ora_core.api import Chunk, Verdict, VerdictStatus, VerifierError

CITATION = re.compile(r"\[source:\s*([^\]]+?)\s*\]", re.IGNORECASE)


def package_sources(package: Any) -> set[str]:
    """The sources of every chunk in the package (a list of chunks, or an object with them)."""
    chunks: Iterable[Any]
    if hasattr(package, "chunks"):
        chunks = package.chunks() if callable(package.chunks) else package.chunks
    elif isinstance(package, list | tuple):
        chunks = package
    else:
        raise VerifierError(f"cannot read citations' evidence from a {type(package).__name__}; "
                            "expected chunks with provenance")
    sources = set()
    for chunk in chunks:
        if not isinstance(chunk, Chunk):
            raise VerifierError(f"evidence item {chunk!r:.60} is not a Chunk with provenance")
        sources.add(chunk.provenance.source)
    return sources


class CitationVerifier:
    name = "example-citations"

    def verify(self, subject: str, package: Any, criteria: str, ctx: Any) -> Verdict:
        available = package_sources(package)
        cited = [m.group(1) for m in CITATION.finditer(subject)]
        invented = [c for c in dict.fromkeys(cited) if c not in available]
        if invented:
            status = VerdictStatus.FAIL
            reasons = [f"cites {c!r}, which is not in the evidence" for c in invented]
        elif cited:
            status = VerdictStatus.PASS
            reasons = [f"all {len(set(cited))} cited source(s) are in the evidence"]
        else:
            status, reasons = VerdictStatus.PASS, ["no citations to check"]
        report = "\n".join([f"cited: {', '.join(cited) or '(none)'}",
                            f"available: {', '.join(sorted(available)) or '(none)'}", *reasons])
        return Verdict(status=status, verifier=self.name, reasons=reasons, raw_output=report,
                       unsupported_claims=invented)


@hookimpl
def ora_register_verifiers(register: Callable[..., None]) -> None:
    register(CitationVerifier())
