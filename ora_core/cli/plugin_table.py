"""The plugin records as a plain text table (``ora plugins list``, ``ora plugins install``)."""

from __future__ import annotations

from typing import Any

import typer


def print_plugin_table(rows: list[dict[str, Any]]) -> None:
    """The plugins as a plain text table: one block of lines per plugin, every name whole (rich's
    boxed table broke names mid-word and cost ~50 ms of the command's 0.4 s)."""
    header = ("plugin", "distribution", "version", "components", "hooks", "layer / assumes", "status")
    table: list[list[list[str]]] = []
    for row in rows:
        comps = [f"{kind}: {name}" for kind, names in sorted(row["components"].items()) for name in names]
        layers = [f"{c['name']}: {c['layer'] or '?'}" + (f" [{', '.join(c['assumes'])}]" if c["assumes"] else "")
                  for c in row["layers"]]
        status = [row["status"], *([row["error"]] if row["error"] else [])]
        hooks = [h.removeprefix("ora_") for h in row["hooks"]]
        table.append([[row["name"]], [row["distribution"]], [row["version"]], comps or ["-"], hooks or ["-"],
                      layers or ["-"], status])
    widths = [max([len(h), *(len(line) for cells in table for line in cells[i][:1 if i == 6 else None])])
              for i, h in enumerate(header)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)).rstrip(),
             "  ".join("-" * w for w in widths)]
    for cells in table:
        for depth in range(max(len(c) for c in cells)):
            parts = [(c[depth] if depth < len(c) else "") for c in cells]
            lines.append("  ".join(p.ljust(w) for p, w in zip(parts, widths, strict=True)).rstrip())
        lines.append("")
    typer.echo("\n".join(lines).rstrip("\n"))
