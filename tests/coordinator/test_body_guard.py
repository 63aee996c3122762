"""The request-body guard's pure parts: JSON depth, body inspection, page cursors."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from secfpp.coordinator.api.body import inspect_body, json_depth
from secfpp.coordinator.api.params import (
    FEDERATION_CURSOR_PATTERN,
    ID_PATTERN,
    INT_CURSOR_PATTERN,
    federation_cursor,
    int_cursor,
    read_federation_cursor,
    read_int_cursor,
)
from secfpp.coordinator.errors import ProblemError
from secfpp.wire import limits


@pytest.mark.parametrize(
    ("text", "depth"),
    [
        ("1", 0),
        ('"[[[{{{"', 0),
        ("[]", 1),
        ("{}", 1),
        ('{"a": [1, {"b": "]]]"}]}', 3),
        ("[[], [[]], [[[]]]]", 4),
        ('["\\"[[[", [2]]', 2),  # an escaped quote does not end the string
        ('["\\\\", [[3]]]', 3),  # an escaped backslash does
        ("[" * 50_000 + "]" * 50_000, 50_000),
    ],
)
def test_json_depth_known_answers(text: str, depth: int) -> None:
    assert json_depth(text.encode()) == depth


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet='[]{}"\\ ,:ab\u00e9'),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=30,
)


def _depth(value: Any) -> int:
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    return 0


@given(JSON, st.booleans())
def test_json_depth_matches_the_structure(value: Any, ascii_only: bool) -> None:
    text = json.dumps(value, ensure_ascii=ascii_only)
    assert json_depth(text.encode()) == _depth(value)


def test_inspect_body() -> None:
    assert inspect_body("application/json", b'{"a": [1]}', max_depth=2) is None
    assert inspect_body("application/octet-stream", b"\x80\x81", max_depth=2) is None
    assert inspect_body("application/json", b"", max_depth=2) is None
    assert inspect_body("application/merge-patch+json; charset=utf-8", b"{}", max_depth=2) is None
    cases = [
        ("application/json", b'{"a": [[1]]}', "malformed_json"),  # depth 3 > 2
        ("application/json", b"\x80\x81{}", "malformed_json"),
        (None, b"{", "malformed_json"),
        ("application/json", b"[NaN]", "malformed_json"),
        ("application/json", b"[-Infinity]", "malformed_json"),
        ("application/json", b"[" + b"9" * 5000 + b"]", "malformed_json"),
        ("text/plain", b"{}", "unsupported_media_type"),
        ("application/x-www-form-urlencoded", b"a=1", "unsupported_media_type"),
    ]
    for content_type, body, code in cases:
        problem = inspect_body(content_type, body, max_depth=2)
        assert isinstance(problem, ProblemError), (content_type, body[:20])
        assert problem.code == code


@given(st.integers(0, limits.INT32_MAX))
def test_int_cursor_round_trip(key: int) -> None:
    cursor = int_cursor(key)
    assert re.fullmatch(INT_CURSOR_PATTERN, cursor)
    assert read_int_cursor(cursor) == key


@given(
    st.datetimes(
        min_value=datetime(1970, 1, 1), max_value=datetime(2200, 1, 1), timezones=st.just(UTC)
    ),
    st.from_regex(ID_PATTERN, fullmatch=True),
)
def test_federation_cursor_round_trip(created_at: datetime, federation_id: str) -> None:
    cursor = federation_cursor(created_at, federation_id)
    assert re.fullmatch(FEDERATION_CURSOR_PATTERN, cursor)
    assert read_federation_cursor(cursor) == (created_at, federation_id)


@given(st.from_regex(INT_CURSOR_PATTERN, fullmatch=True))
def test_every_int_cursor_the_schema_allows_is_read(cursor: str) -> None:
    assert 0 <= read_int_cursor(cursor) <= limits.INT32_MAX


@given(st.from_regex(FEDERATION_CURSOR_PATTERN, fullmatch=True))
def test_every_federation_cursor_the_schema_allows_is_read(cursor: str) -> None:
    created_at, federation_id = read_federation_cursor(cursor)
    assert created_at.tzinfo is UTC
    assert re.fullmatch(ID_PATTERN, federation_id)
