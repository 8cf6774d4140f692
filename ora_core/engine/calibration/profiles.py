"""Calibration profiles: the role -> backend/model map (and fact-check settings) a run uses.

The bundled ``profiles.toml`` holds seed 002's names (``baseline``, ``cross-provider``,
``max-diversity``), ``no-diversity-controls`` (the D5 controls off, for the A/B) and the
planted-bias instrument (``instrument``); ``--profiles FILE`` adds or overrides profiles of the same
shape. A profile changes ``[roles]``, adds ``[backends]`` and changes ``[fact_check]``; nothing else.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ora_core.engine.calibration.fixture import CalibrationPair
from ora_core.engine.calibration.instrument import planted_bias_overrides
from ora_core.engine.calibration.models import ProfileInfo
from ora_core.kernel.config import ROLE_NAMES, FactCheckConfig, deep_merge
from ora_core.kernel.errors import ConfigError, UsageError

BUNDLED_PROFILES = Path(__file__).with_name("profiles.toml")


class Price(BaseModel):
    model_config = ConfigDict(extra="forbid")

    input_per_mtok: float = Field(ge=0)
    output_per_mtok: float = Field(ge=0)


class Profile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    description: str = ""
    roles: dict[str, str] = Field(default_factory=dict)
    backends: dict[str, dict[str, Any]] = Field(default_factory=dict)
    fact_check: dict[str, Any] = Field(default_factory=dict)
    prices: dict[str, Price] = Field(default_factory=dict)
    instrument: Literal["planted-bias"] | None = None
    bias_pp: float = Field(default=20.0, ge=0, le=100)
    instrument_latency_s: float = Field(default=0.0, ge=0)
    #: Scripted rules tried before the instrument's own ({match, reply, on}): to plant a failure (a reply
    #: ``!error:<kind>`` raises that backend error) or another behaviour on chosen prompts.
    instrument_rules_first: list[dict[str, str]] = Field(default_factory=list)
    source: str = ""

    @field_validator("roles")
    @classmethod
    def _known_roles(cls, value: dict[str, str]) -> dict[str, str]:
        unknown = sorted(set(value) - set(ROLE_NAMES))
        if unknown:
            raise ValueError(f"unknown role(s) {', '.join(unknown)} (roles: {', '.join(ROLE_NAMES)})")
        return value

    @field_validator("fact_check")
    @classmethod
    def _fact_check_keys(cls, value: dict[str, Any]) -> dict[str, Any]:
        unknown = sorted(set(value) - set(FactCheckConfig.model_fields))
        if unknown:
            raise ValueError(f"unknown fact_check key(s) {', '.join(unknown)}")
        return value

    def overrides(self, pairs: list[CalibrationPair]) -> dict[str, Any]:
        """The configuration overrides of this profile (the instrument's built from ``pairs``)."""
        out: dict[str, Any] = {}
        if self.instrument == "planted-bias":
            out = planted_bias_overrides(pairs, bias_pp=self.bias_pp, latency_s=self.instrument_latency_s,
                                         rules_first=self.instrument_rules_first)
        return deep_merge(out, {k: v for k, v in (("backends", self.backends), ("roles", self.roles),
                                                    ("fact_check", self.fact_check)) if v})

    def info(self) -> ProfileInfo:
        return ProfileInfo(name=self.name, description=self.description, instrument=self.instrument,
                           roles=dict(self.roles), fact_check=dict(self.fact_check),
                           prices={m: p.model_dump() for m, p in self.prices.items()})


def _read(path: Path) -> dict[str, Any]:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read the profiles file: {exc}", source=str(path)) from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"malformed TOML: {exc}", source=str(path)) from None
    table = data.get("profiles")
    if not isinstance(table, dict):
        raise ConfigError("a profiles file holds [profiles.<name>] tables", source=str(path))
    return table


def load_profiles(extra: str | Path | None = None) -> dict[str, Profile]:
    """The bundled profiles, then ``extra``'s (a profile of the same name replaces the bundled one)."""
    files = [BUNDLED_PROFILES] + ([Path(extra).expanduser()] if extra is not None else [])
    profiles: dict[str, Profile] = {}
    for path in files:
        for name, table in _read(path).items():
            if not isinstance(table, dict):
                raise ConfigError(f"[profiles.{name}] is not a table", source=str(path))
            try:
                profiles[name] = Profile.model_validate({**table, "name": name, "source": str(path)})
            except ValidationError as exc:
                problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())
                raise ConfigError(f"profile {name!r}: {problems}", source=str(path)) from None
    return profiles


def get_profile(name: str, extra: str | Path | None = None) -> Profile:
    profiles = load_profiles(extra)
    if name not in profiles:
        raise UsageError(f"no calibration profile {name!r} (profiles: {', '.join(sorted(profiles))})")
    return profiles[name]
