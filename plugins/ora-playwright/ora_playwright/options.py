"""``[backends.<name>] options`` of a ``playwright`` backend: a light module (no Playwright), so the
kernel can import it to validate a configuration without loading the backend."""

from __future__ import annotations

import difflib
from typing import Any

from pydantic import ConfigDict, Field, field_validator

from ora_core.api import PluginOptions

from .profiles import SelectorProfile

CHROMIUM = "/usr/bin/chromium"


class BrowserOptions(PluginOptions):
    """Declared as the factory's ``options_model``: an unknown key or a wrong type is refused before a
    turn runs; so is a ``selectors`` override that names no field of a selector profile."""

    model_config = ConfigDict(extra="forbid")

    profile: str = "generic"
    profile_file: str | None = None
    selectors: dict[str, Any] = Field(default_factory=dict)  # overrides of profile fields
    user_data_dir: str | None = None  # default: <user data dir>/browser/<profile name>
    executable_path: str = CHROMIUM
    headless: bool = True
    extra_args: list[str] = Field(default_factory=list)
    navigation_timeout_s: float = Field(default=30.0, gt=0)

    @field_validator("selectors")
    @classmethod
    def _selector_fields_exist(cls, value: dict[str, Any]) -> dict[str, Any]:
        known = list(SelectorProfile.model_fields)
        for key in value:
            if key not in known:
                close = difflib.get_close_matches(key, known, n=1, cutoff=0.5)
                hint = f"did you mean {close[0]!r}?" if close else f"known fields: {', '.join(known)}"
                raise ValueError(f"{key!r} is no field of a selector profile; {hint}")
        return value
