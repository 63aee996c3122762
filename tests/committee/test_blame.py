"""What ``rejected`` can and cannot prove (issue 26, item 5; docs/protocol.md section 4,
"What `rejected` proves").

A sender that seals a *valid but inconsistent* share (authentic envelope, right length,
values off the sharing polynomial) to one committee member makes that member's coded
result disagree with the others. Error correction still decodes the right sums, and the
result it discards is the honest *recipient's*: sharing is not verifiable, so the
coordinator cannot tell a member that computed wrongly from one that computed correctly on
a wrong share. The round status names the recipient in ``rejected`` and nobody is dropped;
the API field, protocol.md and the dashboard say exactly that.
"""

from __future__ import annotations

import base64
from typing import Any

import numpy as np
import pytest

import secfpp.participant.protocol as protocol
from secfpp.crypto.wire import pack_field_vector, unpack_field_vector


@pytest.mark.slow  # above 1.5 s: out of the inner loop (bash dev.sh quick)
def test_an_inconsistent_sender_gets_its_recipient_rejected(
    make_federation: Any, kit: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # D = 2 of the 7 members: the aggregation code (K_a = 3) needs 5 results, so 7 present
    # correct one wrong one (with D = 1 they would only detect it, and the round fails).
    f = make_federation(dropout_fraction=0.3)
    number = f.start_round()
    members = f.task(0)["committee"]["members"]
    sender = next(i for i in range(kit.N) if i not in members)  # not even on the committee
    victim = members[2]
    prime = f.engines[sender].params.aggregation_field.prime
    honest_seal = protocol.seal_share
    tampered: list[int] = []

    def inconsistent(private_key: Any, public_key: Any, packed: bytes, **kw: Any) -> bytes:
        context = kw["context"]
        if (context.sender, context.recipient, context.stage) == (
            sender,
            victim,
            "sharing-update",
        ):
            values = unpack_field_vector(packed, prime=prime)
            values[0] = (values[0] + 1) % prime  # off the polynomial, still a field vector
            packed = pack_field_vector(values, prime=prime)
            tampered.append(victim)
        return honest_seal(private_key, public_key, packed, **kw)

    monkeypatch.setattr(protocol, "seal_share", inconsistent)
    start = np.frombuffer(base64.b64decode(f.task(0)["global_prompt"]["data"]), dtype="<f8")
    f.run_round(number=number)
    assert tampered == [victim]
    status = f.status(number)
    assert status["stage"] == "published", status["failure_reason"]
    # The honest recipient is the one named, not the sender, and nobody is dropped.
    assert status["rejected"]["aggregation"] == [victim]
    assert sender not in status["rejected"]["aggregation"]
    assert status["dropped"] == {}
    assert not [e for e in status["events"] if e["kind"] == "refusal"]
    assert status["uploads"]["aggregation"] == members
    # Corrected exactly: each published prompt is round 1's start plus its members' exact
    # mean update (the tampered share never reaches a decoded sum).
    published = next(e for e in status["events"] if e["to_stage"] == "published")
    clusters = {c["cluster"]: c["members"] for c in status["clusters"]}
    scale = float(f.engines[0].params.aggregation_field.scale)
    prompts = f.prompts(number)
    assert published["detail"]["aggregated"]
    for cluster in published["detail"]["aggregated"]:
        summed = sorted(set(clusters[cluster]) & set(status["present"]))
        total = sum(np.round(kit.update_vector(i, number) * scale).astype(np.int64) for i in summed)
        mean = np.asarray(total, dtype=np.float64) / scale / len(summed)
        np.testing.assert_array_equal(prompts[cluster], start + mean)
    # What the API promises about the field says so.
    schema = f.client.get("/openapi.json").json()["components"]["schemas"]
    described = next(
        m["properties"]["rejected"]["description"]
        for m in schema.values()
        if "rejected" in m.get("properties", {})
    )
    assert "does not prove" in described
    assert "inconsistent share" in described
