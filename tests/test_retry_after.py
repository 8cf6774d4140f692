"""``Retry-After`` is read the same way for every HTTP backend plugin."""

from __future__ import annotations

from datetime import datetime, timezone

from ora_core.kits.retry_after import parse_retry_after, retry_after_note

NOW = datetime(2026, 11, 23, 12, 0, 0, tzinfo=timezone.utc)


def test_delta_seconds_and_http_dates_become_seconds_from_now():
    assert parse_retry_after("30", NOW) == 30.0
    assert parse_retry_after(" 1.5 ", NOW) == 1.5
    assert parse_retry_after("Mon, 23 Nov 2026 12:00:45 GMT", NOW) == 45.0


def test_a_past_date_or_negative_delay_is_zero_never_negative():
    assert parse_retry_after("-5", NOW) == 0.0
    assert parse_retry_after("Mon, 23 Nov 2026 11:59:00 GMT", NOW) == 0.0


def test_absent_or_unreadable_headers_are_none_so_the_caller_backs_off_itself():
    assert parse_retry_after(None, NOW) is None
    assert parse_retry_after("", NOW) is None
    assert parse_retry_after("soon", NOW) is None


def test_the_error_message_tells_an_unreadable_header_from_an_absent_one():
    assert retry_after_note("30", 30.0) == ", Retry-After 30s"
    assert "unreadable: 'soon'" in retry_after_note("soon", parse_retry_after("soon", NOW))
    assert retry_after_note(None, None) == ""
