"""Generate committee_vectors.json: known answers for crypto.committee.draw_committee.

Written from the specification in crypto/committee.py's module docstring (and
docs/protocol.md, "Committee sharing") with hashlib and int.from_bytes only; it imports
nothing from the project, so a wrong implementation cannot agree with it by sharing code.

    cd tests/crypto/kat && python generate_committee_kat.py > committee_vectors.json
"""

from __future__ import annotations

import hashlib
import json


def le(value: int, width: int) -> bytes:
    return value.to_bytes(width, "little")


def draw(
    federation_id: str, round_number: int, members: list[int], beacon: bytes, size: int
) -> tuple[str, list[int]]:
    roster = sorted(members)
    fid = federation_id.encode("utf-8")
    message = b"secfpp-committee|v1" + le(len(fid), 4) + fid + le(round_number, 8)
    message += le(size, 4) + le(len(roster), 4) + b"".join(le(m, 8) for m in roster)
    message += le(len(beacon), 4) + beacon
    seed = hashlib.sha256(message).digest()
    stream = bytearray()
    position = 0

    def next_word() -> int:
        nonlocal position
        if position + 8 > len(stream):
            stream.extend(hashlib.sha256(seed + le(len(stream) // 32, 8)).digest())
        word = int.from_bytes(stream[position : position + 8], "little")
        position += 8
        return word

    for i in range(size):
        remaining = len(roster) - i
        limit = 2**64 - (2**64 % remaining)
        while True:
            word = next_word()
            if word < limit:
                break
        j = i + word % remaining
        roster[i], roster[j] = roster[j], roster[i]
    return seed.hex(), sorted(roster[:size])


CASES = [
    ("fed-kat", 7, [3, 5, 8, 13, 21, 34, 55, 89, 144, 233, 377, 610], b"beacon-one-abcdef", 5),
    ("fed-kat", 8, [3, 5, 8, 13, 21, 34, 55, 89, 144, 233, 377, 610], b"beacon-one-abcdef", 5),
    ("federation/ü", 1, list(range(1000)), hashlib.sha256(b"drand-like").digest(), 379),
    ("full", 0, [9, 1, 4, 7], b"\x00" * 16, 4),
]


def main() -> None:
    vectors = []
    for fid, rnd, members, beacon, size in CASES:
        seed, committee = draw(fid, rnd, members, beacon, size)
        vectors.append(
            {
                "federation_id": fid,
                "round": rnd,
                "members": members,
                "beacon": beacon.hex(),
                "size": size,
                "seed": seed,
                "committee": committee,
            }
        )
    print(json.dumps({"committee_draw": vectors}, indent=1))


if __name__ == "__main__":
    main()
