"""The request-body guard's pure parts: JSON depth, body inspection, page cursors."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from coordinator.api.body import inspect_body, json_depth
from coordinator.api.params import decode_cursor, encode_cursor
from coordinator.errors import ProblemError


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


@given(st.lists(st.one_of(st.integers(), st.text()), max_size=4))
def test_cursor_round_trip(key: list[Any]) -> None:
    types = tuple(type(v) for v in key)
    assert decode_cursor(encode_cursor(*key), types) == tuple(key)


@pytest.mark.parametrize("cursor", ["", "!!", "e30", "WzFd", "WyIxIl0", "WzEsMl0", "W3RydWVd"])
def test_foreign_cursors_are_refused(cursor: str) -> None:
    # empty, not base64, {}, [1] for (str,), ["1"] for (int,)... , [1,2], [true]
    types: tuple[type, ...] = (str,) if cursor in ("WzFd",) else (int,)
    with pytest.raises(ProblemError) as info:
        decode_cursor(cursor, types)
    assert info.value.code == "invalid_request"
    assert info.value.extra["parameter"] == "cursor"
