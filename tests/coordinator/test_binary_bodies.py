"""Binary share uploads and inboxes (``application/octet-stream``, crypto.wire batches).

The binary forms carry exactly the JSON forms' envelopes: a binary upload stores the
same rows, the JSON and binary forms of one upload replay each other, a binary inbox
holds the bytes the JSON inbox holds in base64, and every malformed batch is a 4xx
problem with a stable code that changes nothing.
"""

from __future__ import annotations

import base64
import struct
from typing import Any

import pytest

from secfpp.crypto.errors import WireFormatError
from secfpp.crypto.wire import pack_envelopes, pack_inbox, unpack_envelopes, unpack_inbox
from tests.support.asgi import TestClient
from tests.support.common import ADMIN
from tests.support.coordinator import FederationHarness
from tests.support.frozen import FrozenFederations, copied_database, round_one_started

# ``sharing`` is built once per backend and session and copied into each test's database
# (tests/support/frozen.py; building it cost 0.5 s of CPU per test), so the module runs on
# one worker.
pytestmark = pytest.mark.xdist_group("binary_bodies")

OCTETS = {"Content-Type": "application/octet-stream"}
SHARES = "/v1/participants/me/rounds/{number}/shares"


FROZEN = {"sharing": round_one_started}


db_url = copied_database(FROZEN)


@pytest.fixture
def sharing(client: TestClient, backend: str, frozen: FrozenFederations) -> FederationHarness:
    """Round 1 in the sharing stage, nobody has shared yet."""
    h: FederationHarness = frozen.built(round_one_started, backend).twin(client)
    assert h.status(1)["uploads"]["sharing"] == []
    return h


def _records(body: dict[str, Any]) -> list[tuple[int, str, bytes]]:
    return [
        (e["recipient"], e["kind"], base64.b64decode(e["ciphertext"])) for e in body["envelopes"]
    ]


def _post(h: Any, content: bytes, sim_index: int = 1, number: int = 1) -> Any:
    return h.client.post(
        SHARES.format(number=number),
        content=content,
        headers={**h.sims[sim_index].headers, **OCTETS},
    )


def _binary_body(h: Any, sim_index: int = 1) -> tuple[dict[str, Any], bytes]:
    sim = h.sims[sim_index]
    body = sim.share_body(sim.task())
    return body, pack_envelopes(_records(body))


# -- the wire format ----------------------------------------------------------------------
def test_envelope_batch_known_answer_and_round_trip() -> None:
    data = pack_envelopes([(3, "update", b"\xaa\xbb"), (0, "prompt", b"")])
    assert data == (
        b"SFE\x01" + struct.pack("<I", 2)
        + struct.pack("<IB3sI", 3, 1, b"\0\0\0", 2) + b"\xaa\xbb"
        + struct.pack("<IB3sI", 0, 0, b"\0\0\0", 0)
    )  # fmt: skip
    assert unpack_envelopes(data) == [(3, "update", b"\xaa\xbb"), (0, "prompt", b"")]
    inbox = pack_inbox(7, 2, [0, 5], [(5, "prompt", b"xyz")])
    assert inbox[:24] == b"SFI\x01" + struct.pack("<IQI4s", 2, 7, 2, b"\0" * 4)
    assert unpack_inbox(inbox) == (7, 2, [0, 5], [(5, "prompt", b"xyz")])


@pytest.mark.parametrize(
    ("mutate", "reason"),
    [
        (lambda d: d[:5], "too_short"),
        (lambda d: b"SFV" + d[3:], "bad_magic"),
        (lambda d: d[:3] + b"\x02" + d[4:], "unsupported_version"),
        (lambda d: d[:4] + struct.pack("<I", 3) + d[8:], "length_mismatch"),  # count too high
        (lambda d: d[:4] + struct.pack("<I", 1) + d[8:], "length_mismatch"),  # count too low
        (lambda d: d[:-1], "length_mismatch"),  # truncated ciphertext
        (lambda d: d + b"\x00", "length_mismatch"),  # trailing byte
        (lambda d: d[:12] + b"\x07" + d[13:], "bad_kind"),
        (lambda d: d[:13] + b"\x01" + d[14:], "reserved_nonzero"),
        (lambda d: d[:4] + struct.pack("<I", 5000) + d[8:], "too_large"),
    ],
)
def test_malformed_batches_are_refused_with_a_reason(mutate: Any, reason: str) -> None:
    data = pack_envelopes([(1, "prompt", b"abcd"), (2, "update", b"efgh")])
    with pytest.raises(WireFormatError) as caught:
        unpack_envelopes(mutate(data))
    assert caught.value.reason == reason


# -- uploads ------------------------------------------------------------------------------
def test_a_binary_upload_stores_what_the_json_upload_stores(
    sharing: Any, snapshot: Any, problem: Any
) -> None:
    body, data = _binary_body(sharing)
    r = _post(sharing, data)
    assert r.status_code == 200, r.text
    receipt = r.json()
    assert receipt["accepted"] == len(body["envelopes"])
    assert not receipt["replayed"]
    after = snapshot()
    stored = {
        (row.recipient, row.kind, bytes(row.ciphertext))
        for row in _envelope_rows(sharing, sender=sharing.sims[1].index)
    }
    assert stored == set(_records(body))
    # the same envelopes again, either form: a replay that changes nothing
    assert _post(sharing, data).json()["replayed"] is True
    r = sharing.client.post(SHARES.format(number=1), json=body, headers=sharing.sims[1].headers)
    assert r.status_code == 200
    assert r.json()["replayed"] is True
    assert snapshot() == after
    # other bytes for the same slots: a conflict
    records = _records(body)
    changed = [(records[0][0], records[0][1], bytes(len(records[0][2]))), *records[1:]]
    problem(_post(sharing, pack_envelopes(changed)), 409, "conflicting_upload")
    assert snapshot() == after


def _envelope_rows(h: Any, sender: int) -> list[Any]:
    from sqlalchemy import select

    from secfpp.coordinator.db.models import ShareEnvelope

    with h.client.app.state.sessions() as session:
        return list(
            session.execute(
                select(ShareEnvelope.recipient, ShareEnvelope.kind, ShareEnvelope.ciphertext).where(
                    ShareEnvelope.sender == sender
                )
            )
        )


@pytest.mark.parametrize(
    ("case", "reason"),
    [
        ("empty", "too_short"),
        ("truncated", "length_mismatch"),
        ("trailing", "length_mismatch"),
        ("garbled_magic", "bad_magic"),
        ("count_too_high", "length_mismatch"),
        ("count_over_limit", "too_large"),
        ("bad_kind", "bad_kind"),
        ("json_as_octets", "bad_magic"),
    ],
)
def test_malformed_binary_uploads(
    sharing: Any, snapshot: Any, problem: Any, case: str, reason: str
) -> None:
    body, data = _binary_body(sharing)
    bad = {
        "empty": b"",
        "truncated": data[: len(data) // 2],
        "trailing": data + b"\x00\x01",
        "garbled_magic": b"XYZ" + data[3:],
        "count_too_high": data[:4] + struct.pack("<I", len(body["envelopes"]) + 1) + data[8:],
        "count_over_limit": data[:4] + struct.pack("<I", 2**32 - 1) + data[8:],
        "bad_kind": data[:12] + b"\x09" + data[13:],
        "json_as_octets": b'{"envelopes": []}',
    }[case]
    before = snapshot()
    found = problem(_post(sharing, bad), 422, "bad_payload")
    assert found["reason"] == reason
    assert snapshot() == before


def test_wrong_envelope_counts_and_sizes(sharing: Any, snapshot: Any, problem: Any) -> None:
    body, _ = _binary_body(sharing)
    records = _records(body)
    before = snapshot()
    problem(_post(sharing, pack_envelopes(records[:-1])), 422, "missing_recipient")
    problem(_post(sharing, pack_envelopes([*records, records[0]])), 422, "duplicate_envelope")
    shorter = [(records[0][0], records[0][1], records[0][2][:-1]), *records[1:]]
    assert problem(_post(sharing, pack_envelopes(shorter)), 422, "bad_envelope")["reason"] == (
        "wrong_length"
    )
    stranger = [(99, records[0][1], records[0][2]), *records[1:]]
    assert (
        problem(_post(sharing, pack_envelopes(stranger)), 422, "unknown_recipient")["recipient"]
        == 99
    )
    assert snapshot() == before


def test_binary_bodies_obey_the_size_limit(sharing: Any, snapshot: Any, problem: Any) -> None:
    before = snapshot()
    oversized = b"SFE\x01" + bytes(300 * 1024)  # the test settings allow 256 KiB
    problem(_post(sharing, oversized), 413, "payload_too_large")

    def chunks() -> Any:  # no Content-Length: counted as it streams
        for _ in range(40):
            yield b"\x00" * 8192

    r = sharing.client.post(
        SHARES.format(number=1), content=chunks(), headers={**sharing.sims[1].headers, **OCTETS}
    )
    problem(r, 413, "payload_too_large")
    assert snapshot() == before


def test_binary_upload_needs_a_token_first(sharing: Any, problem: Any) -> None:
    r = sharing.client.post(SHARES.format(number=1), content=b"garbage", headers=OCTETS)
    problem(r, 401, "invalid_token")


def test_other_media_types_are_refused(sharing: Any, problem: Any) -> None:
    _, data = _binary_body(sharing)
    r = sharing.client.post(
        SHARES.format(number=1),
        content=data,
        headers={**sharing.sims[1].headers, "Content-Type": "application/x-binary"},
    )
    problem(r, 415, "unsupported_media_type")


# -- inboxes ------------------------------------------------------------------------------
def test_binary_inbox_holds_the_json_inbox(harness: Any) -> None:
    harness.start_round()
    harness.act()  # everyone shares: sharing closes
    sim = harness.sims[2]
    path = "/v1/participants/me/rounds/1/inbox"
    as_json = harness.client.get(path, headers=sim.headers)
    assert as_json.status_code == 200
    assert as_json.headers["content-type"] == "application/json"
    doc = as_json.json()
    # Accept preferring JSON, or absent: JSON exactly as before
    for accept in ("application/json", "application/json, application/octet-stream;q=0.5"):
        r = harness.client.get(path, headers={**sim.headers, "Accept": accept})
        assert r.json() == doc
    r = harness.client.get(path, headers={**sim.headers, "Accept": "application/octet-stream"})
    assert r.status_code == 200
    assert r.headers["content-type"] == "application/octet-stream"
    number, recipient, senders, records = unpack_inbox(r.content)
    assert (number, recipient, senders) == (doc["round"], doc["recipient"], doc["senders"])
    assert records == [
        (e["sender"], e["kind"], base64.b64decode(e["ciphertext"])) for e in doc["envelopes"]
    ]
    # prompt and update from every sender, and a zero-sharing (re-randomization, on by default
    # at N = 8) from each of the round's contributors
    status = harness.client.get(f"/v1/federations/{harness.id}/rounds/1", headers=ADMIN).json()
    assert len(records) == 2 * len(harness.sims) + len(status["zero_contributors"])
    # problems stay JSON problem documents
    r = harness.client.get(
        f"/v1/participants/{harness.sims[0].participant_id}/rounds/1/inbox",
        headers={**sim.headers, "Accept": "application/octet-stream"},
    )
    assert r.status_code == 403
    assert r.json()["code"] == "not_your_inbox"


def test_openapi_describes_both_media_types(client: Any) -> None:
    doc = client.get("/openapi.json").json()
    upload = doc["paths"]["/v1/participants/me/rounds/{number}/shares"]["post"]
    content = upload["requestBody"]["content"]
    assert set(content) == {"application/json", "application/octet-stream"}
    envelope = content["application/json"]["schema"]["properties"]["envelopes"]
    kinds = ["prompt", "update", "zero", "zero-seed"]
    assert envelope["items"]["properties"]["kind"]["enum"] == kinds
    assert "bad_payload" in upload["responses"]["422"]["x-problem-codes"]
    inbox = doc["paths"]["/v1/participants/{participant_id}/rounds/{number}/inbox"]["get"]
    served = inbox["responses"]["200"]["content"]
    assert served["application/json"]["schema"] == {"$ref": "#/components/schemas/Inbox"}
    assert served["application/octet-stream"]["schema"]["format"] == "binary"
