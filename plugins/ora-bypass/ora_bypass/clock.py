"""The clock-claims check: a direct answer may only state the time the system clock gave it.

Seed 000 failure #5: the bypass model fabricated "Friday, May 15, 2026 at 10:07:49 AM PDT".
Gear 1 now puts a system clock reading into the prompt for time and date questions
(``ctx.data["clock"]``: ISO timestamps ``utc`` and ``local``); this detector flags every clock
time, weekday, month-day or year in the answer that matches neither reading. With no reading in
``ctx.data`` the turn asked no time question, so the output's dates are not claims about the
clock (an analysis citing 2019 is not a clock claim): the detector stays quiet. It runs at every
``model_output`` boundary, so this is what keeps it from flagging every year in an analysis.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from ora_core.api import Signal, lazy_compile

# (?<![\d.:]) rather than \b: an ISO timestamp's time follows a "T" ("2026-12-31T09:45:57Z"), and
# "T09" has no word boundary; a digit, dot or colon before it would make it part of another number.
_TIME = lazy_compile(r"(?<![\d.:])([01]?\d|2[0-3])[:.h]([0-5]\d)(?::[0-5]\d(?:\.\d+)?)?\s*(a\.?m\.?|p\.?m\.?)?"
                     r"(?!\w|[.:]\d)|(?<=T)([01]\d|2[0-3]):([0-5]\d)", re.I)
#: Numeric dates: ISO (2026-12-31), and day/month/year or month/day/year with / . or - .
_ISO_DATE = lazy_compile(r"(?<!\d)(\d{4})-(\d{1,2})-(\d{1,2})(?!\d)")
_NUMERIC_DATE = lazy_compile(r"(?<![\d.:/-])(\d{1,2})[/.-](\d{1,2})[/.-](\d{4})(?!\d|[/.-]\d)")
_WEEKDAY = lazy_compile(r"\b(monday|tuesday|wednesday|thursday|friday|saturday|sunday)\b", re.I)
_YEAR = lazy_compile(r"\b(19[5-9]\d|20\d\d|21\d\d)\b")
_MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september",
           "october", "november", "december")
_MONTH_DAY = lazy_compile(r"\b(" + "|".join(_MONTHS) + r")\s+(\d{1,2})(?:st|nd|rd|th)?\b"
                        r"|\b(\d{1,2})(?:st|nd|rd|th)?\s+(?:of\s+)?(" + "|".join(_MONTHS) + r")\b", re.I)
TOLERANCE_MIN = 3


class ClockClaimsDetector:
    name = "clock-claims"
    kind = "clock_claim"  # SignalKind.CLOCK_CLAIM: the direct gear acts on it
    layer = "model_output"
    assumes = frozenset({"model_generated"})

    def detect(self, text: str, ctx: Any = None) -> list[Signal]:
        readings = _readings(ctx)
        if not readings:
            return []
        signals: list[Signal] = []

        def flag(name: str, m: re.Match[str]) -> None:
            signals.append(Signal(detector=self.name, kind=self.kind, name=name, matched=m.group(0),
                                  start=m.start(), end=m.end(),
                                  data={"clock": [r.isoformat() for r in readings]}))

        for m in _TIME.finditer(text):
            hour, minute = int(m.group(1) or m.group(4)), int(m.group(2) or m.group(5))
            suffix = (m.group(3) or "").replace(".", "").lower()
            if suffix == "pm" and hour < 12:
                hour += 12
            elif suffix == "am" and hour == 12:
                hour = 0
            said = hour * 60 + minute
            if not any(_minutes_apart(said, r.hour * 60 + r.minute) <= TOLERANCE_MIN for r in readings):
                flag("unsupported-time", m)
        for m in _WEEKDAY.finditer(text):
            if m.group(1).lower() not in {r.strftime("%A").lower() for r in readings}:
                flag("unsupported-weekday", m)
        for m in _YEAR.finditer(text):
            if int(m.group(1)) not in {r.year for r in readings}:
                flag("unsupported-year", m)
        days = {(r.year, r.month, r.day) for r in readings}
        for m in _ISO_DATE.finditer(text):
            if (int(m.group(1)), int(m.group(2)), int(m.group(3))) not in days:
                flag("unsupported-date", m)
        for m in _NUMERIC_DATE.finditer(text):
            a, b, year = int(m.group(1)), int(m.group(2)), int(m.group(3))
            if (year, b, a) not in days and (year, a, b) not in days:  # day/month or month/day
                flag("unsupported-date", m)
        for m in _MONTH_DAY.finditer(text):
            month = (m.group(1) or m.group(4)).lower()
            day = int(m.group(2) or m.group(3))
            if (month, day) not in {(r.strftime("%B").lower(), r.day) for r in readings}:
                flag("unsupported-date", m)
        return signals


def _readings(ctx: Any) -> list[datetime]:
    data = getattr(ctx, "data", None) or {}
    clock = data.get("clock") or {}
    out = []
    for key in ("utc", "local"):
        if clock.get(key):
            out.append(datetime.fromisoformat(clock[key]))
    return out


def _minutes_apart(a: int, b: int) -> int:
    diff = abs(a - b) % (24 * 60)
    return min(diff, 24 * 60 - diff)
