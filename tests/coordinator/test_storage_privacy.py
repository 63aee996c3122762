"""The coordinator's database never holds a share in clear: only sealed envelopes."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from sqlalchemy import select

from secfpp.coordinator.db.engine import make_engine
from secfpp.coordinator.db.models import Base
from secfpp.crypto.wire import element_width, pack_field_vector, unpack_field_vector


def _stored_blobs(db_url: str) -> list[bytes]:
    """Every stored value as bytes (binary as is, text and JSON as UTF-8)."""
    blobs: list[bytes] = []
    engine = make_engine(db_url)
    try:
        with engine.connect() as conn:
            for table in Base.metadata.tables.values():
                for row in conn.execute(select(table)):
                    for value in row:
                        if isinstance(value, bytes | bytearray | memoryview):
                            blobs.append(bytes(value))
                        elif isinstance(value, dict | list):
                            blobs.append(json.dumps(value).encode())
                        elif value is not None:
                            blobs.append(str(value).encode())
    finally:
        engine.dispose()
    return blobs


def _contains_share(blob: bytes, share: np.ndarray, prime: int) -> bool:
    """Does ``blob`` hold ``share`` packed, as raw elements, or as a JSON number list?"""
    return _Needles(share, prime).found_in(blob, blob.replace(b" ", b""))


class _Needles:
    """The forms of one share that :func:`_contains_share` looks for, made once per share
    (the test checks every share against every stored value)."""

    def __init__(self, share: np.ndarray, prime: int) -> None:
        self.share, self.prime = share, prime
        self.width = element_width(prime)
        self.exact = (
            pack_field_vector(share, prime=prime),
            share.astype(f"<u{self.width}").tobytes(),
        )
        self.text = ",".join(str(int(v)) for v in share).encode()

    def found_in(self, blob: bytes, unspaced: bytes) -> bool:
        """In ``blob`` (``unspaced``: the same without spaces)?"""
        if any(needle in blob for needle in self.exact) or self.text in unspaced:
            return True
        share, width = self.share, self.width
        start = blob.find(b"SFV")
        while start >= 0:  # anything that decodes as a packed vector at any offset
            try:
                decoded = unpack_field_vector(
                    blob[start : start + 24 + share.size * width],
                    prime=self.prime,
                    expected_length=share.size,
                )
            except ValueError:
                pass
            else:
                if np.array_equal(decoded, share):
                    return True
            start = blob.find(b"SFV", start + 1)
        return False


def test_detector_finds_a_planted_share() -> None:
    share = np.arange(5, dtype=np.int64) * 1000 + 17
    prime = 2**31 - 1
    for planted in (
        b"xx" + pack_field_vector(share, prime=prime) + b"yy",
        b"zz" + share.astype("<u4").tobytes(),
        json.dumps({"s": share.tolist()}).encode(),
    ):
        assert _contains_share(planted, share, prime)
    assert not _contains_share(b"nothing here", share, prime)


@pytest.mark.slow  # over 7 s: left out of the inner loop (bash dev.sh quick)
def test_no_share_is_stored_in_clear(harness: Any, db_url: str) -> None:
    number = harness.run_round()
    assert harness.stage(number) == "published"
    blobs = _stored_blobs(db_url)
    unspaced = [b.replace(b" ", b"") for b in blobs]
    config = harness.sims[0].config
    primes = {
        "prompt": config.crypto.clustering_field.prime,
        "update": config.crypto.aggregation_field.prime,
        "zero": config.crypto.clustering_field.prime,  # re-randomizing contributions
    }
    checked = 0
    for sim in harness.sims:
        for (round_number, kind), shares in sim.shares.items():
            assert round_number == number
            if kind == "zero":  # seeds to the first points, vectors to the others
                for seed in shares.seeds:
                    assert not any(seed in b or seed.hex().encode() in b for b in blobs)
                    checked += 1
                shares = shares.derived
            for share in shares:
                needles = _Needles(share, primes[kind])
                assert not any(map(needles.found_in, blobs, unspaced)), (
                    f"a {kind} share of participant {sim.index} is stored in clear"
                )
                checked += 1
    assert config.crypto.rerandomize_distances  # the default at N = 8
    contributors = sum(1 for sim in harness.sims if (number, "zero") in sim.shares)
    assert 0 < contributors < 8  # the round's T + 1 + D contributors
    assert checked == 8 * 8 * 2 + contributors * 8
