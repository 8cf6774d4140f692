"""Writing a calibration report: one file per renderer, named after the run.

A renderer turns a ``CalibrationReport`` (everything the report shows; nothing else is read) into
text: ``RENDERERS`` maps a format to ``(suffix, render)``. JSON is built in. The HTML report is a
renderer module of its own, ``ora_core.engine.calibration.html`` exposing ``render(report) -> str``
(and ``SUFFIX``), found when present (``renderers()``); adding it touches neither the metrics nor
this module. A format whose renderer is missing or fails is named in ``Written.problems``, never
skipped quietly. The A/B decision sheet (``CompareReport``) is written the same way by
``write_compare``: JSON, and the module's ``render_compare`` (``COMPARE_SUFFIX``).
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ora_core.engine.calibration.models import CalibrationReport, CompareReport

Render = Callable[[CalibrationReport], str]

#: Formats whose renderer lives in a module of its own: format -> module (``render``, ``SUFFIX``).
RENDERER_MODULES: dict[str, str] = {"html": "ora_core.engine.calibration.html"}


def render_json(report: CalibrationReport | CompareReport) -> str:
    return report.model_dump_json(by_alias=True, indent=2) + "\n"


RENDERERS: dict[str, tuple[str, Render]] = {"json": (".json", render_json)}


@dataclass
class Written:
    files: dict[str, Path] = field(default_factory=dict)  # format -> path
    problems: dict[str, str] = field(default_factory=dict)  # format -> why it was not written


def _renderer_modules() -> Iterator[tuple[str, str, Any, str | None]]:
    """``(format, module name, module or None, why not)`` for each renderer module: a module that is
    not installed is named; one that fails on import raises (its own bug, not a missing part)."""
    for fmt, module_name in RENDERER_MODULES.items():
        try:
            yield fmt, module_name, importlib.import_module(module_name), None
        except ModuleNotFoundError as exc:
            if exc.name != module_name:
                raise
            yield fmt, module_name, None, f"no {fmt.upper()} renderer is installed yet ({module_name})"


def renderers() -> tuple[dict[str, tuple[str, Render]], dict[str, str]]:
    """The renderers available now (built in, then the renderer modules found) and, for each module
    format that is not available, why."""
    found = dict(RENDERERS)
    missing: dict[str, str] = {}
    for fmt, _name, module, why in _renderer_modules():
        if module is None:
            missing[fmt] = str(why)
            continue
        found[fmt] = (getattr(module, "SUFFIX", f".{fmt}"), module.render)
    return found, missing


def write_reports(report: CalibrationReport, out_dir: Path, stem: str | None = None) -> Written:
    """Every available format of ``report`` as ``<out_dir>/<stem><suffix>`` (stem: the run id)."""
    stem = stem or report.run_id
    available, missing = renderers()
    written = Written(problems=dict(missing))
    for fmt, (suffix, render) in available.items():
        _write_rendered(written, fmt, out_dir / f"{stem}{suffix}", render, report)
    return written


def _write_rendered(written: Written, fmt: str, path: Path, render: Callable[[Any], str], subject: Any) -> None:
    """``render(subject)`` written atomically to ``path``; a renderer that fails is named in
    ``written.problems`` and the other formats still write."""
    try:
        text = render(subject)
    except Exception as exc:  # noqa: BLE001 - named in written.problems, which the CLI prints
        written.problems[fmt] = f"the {fmt} renderer failed: {type(exc).__name__}: {exc}"
        return
    write_atomic(path, text)
    written.files[fmt] = path


def write_compare(sheet: CompareReport, out_dir: Path, stem: str) -> Written:
    """The A/B decision sheet as ``<out_dir>/<stem>.json``, and ``<stem>.html`` when the HTML renderer
    module is present (its ``render_compare``); a missing or failing renderer is named, never skipped."""
    written = Written()
    write_atomic(out_dir / f"{stem}.json", render_json(sheet))
    written.files["json"] = out_dir / f"{stem}.json"
    for fmt, module_name, module, why in _renderer_modules():
        if module is None:
            written.problems[fmt] = str(why)
            continue
        render = getattr(module, "render_compare", None)
        if render is None:
            written.problems[fmt] = f"the {fmt} renderer ({module_name}) has no render_compare"
            continue
        _write_rendered(written, fmt, out_dir / f"{stem}{getattr(module, 'COMPARE_SUFFIX', f'.{fmt}')}", render, sheet)
    return written


def write_atomic(path: Path, text: str) -> None:
    """Write, then rename: a reader never sees half a report, a kill never leaves one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def load_report(path: str | Path) -> CalibrationReport:
    return CalibrationReport.model_validate_json(Path(path).read_text(encoding="utf-8"))
