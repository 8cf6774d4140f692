"""The default mode pack: the Markdown mode files under the repository's ``modes/``.

It ships in the ``ora-core`` distribution but registers through the ``ora`` entry-point group
like any third-party mode pack, so ``ORA_DISABLE_PLUGINS=modes-default`` switches it off.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ora_core import hookimpl


def modes_dir() -> Path:
    here = Path(__file__).resolve().parent
    installed = here / "modes"  # a wheel install: force-included beside this module
    return installed if installed.is_dir() else here.parent / "modes"  # a source checkout


@hookimpl
def ora_register_modes(register: Callable[..., None]) -> None:
    register(modes_dir(), name="default")
