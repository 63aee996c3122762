"""Generate known-answer vectors for field arithmetic, quantization and LCC.

The oracle is independent of ``secfpp.crypto.field``/``secfpp.crypto.lcc``: field arithmetic and
Lagrange interpolation come from ``galois`` (``galois.GF``, ``galois.lagrange_poly``),
quantization from plain Python integers and ``fractions``. Only the randomness is shared
with the code under test: the masks are read from ``secfpp.crypto.rng.DeterministicRandom``
exactly as ``LagrangeCode.share`` consumes it (``field_elements(p, (T, L))``), which is
itself pinned by a raw-bytes vector here. The masks are the sharing polynomial's values
at the first ``T`` participants' points ``alpha_0..alpha_{T-1}`` (see ``crypto/lcc.py``),
and the data chunks its values at ``beta_1..beta_K``.

Run from the repository root:  python tests/crypto/kat/generate_kat.py
"""

from __future__ import annotations

import json
import random
from fractions import Fraction
from pathlib import Path

import galois
import numpy as np

from secfpp.crypto.rng import DeterministicRandom

OUT = Path(__file__).with_name("vectors.json")
PRIMES = [65537, 2**31 - 1, 2**61 - 1]


def field_ops(p: int, rnd: random.Random) -> dict[str, object]:
    GF = galois.GF(p)
    a = [rnd.randrange(p) for _ in range(16)] + [0, p - 1]
    b = [rnd.randrange(p) for _ in range(16)] + [p - 1, p - 1]
    ga, gb = GF(a), GF(b)
    m = [[rnd.randrange(p) for _ in range(5)] for _ in range(3)]
    n = [[rnd.randrange(p) for _ in range(4)] for _ in range(5)]
    return {
        "prime": p,
        "a": a,
        "b": b,
        "add": [int(v) for v in ga + gb],
        "sub": [int(v) for v in ga - gb],
        "mul": [int(v) for v in ga * gb],
        "m": m,
        "n": n,
        "matmul": [[int(v) for v in row] for row in GF(m) @ GF(n)],
    }


def quantization(p: int, rnd: random.Random) -> dict[str, object]:
    bits, clip = 8, 2.0
    xs = [rnd.uniform(-3, 3) for _ in range(12)] + [0.5 / 256, -0.5 / 256, 1.5 / 256]
    out = []
    for x in xs:
        c = min(max(Fraction(x), Fraction(-clip)), Fraction(clip)) * 2**bits
        q = round(c)  # Python's round is round-half-even, like numpy.rint
        out.append(q % p)
    return {"prime": p, "bits": bits, "clip": clip, "x": xs, "q": out}


def lcc_share(p: int, k: int, t: int, n: int, seed: int, rnd: random.Random) -> dict[str, object]:
    GF = galois.GF(p)
    length = 7
    x = [rnd.randrange(p) for _ in range(length)]
    chunk = -(-length // k)
    padded = x + [0] * (k * chunk - length)
    masks = DeterministicRandom(seed).field_elements(p, (t, chunk))
    alphas = [k + t + 1 + j for j in range(n)]
    points = list(range(1, k + 1)) + alphas[:t]  # beta_1..beta_K, alpha_0..alpha_{T-1}
    shares = []
    for col in range(chunk):
        ys = [padded[c * chunk + col] for c in range(k)] + [int(v) for v in masks[:, col]]
        poly = galois.lagrange_poly(GF(points), GF(ys))
        shares.append([int(poly(GF(a))) for a in alphas])
    return {
        "prime": p,
        "k": k,
        "t": t,
        "n": n,
        "seed": seed,
        "x": x,
        "shares": [list(row) for row in np.array(shares, dtype=object).T.tolist()],
    }


def main() -> None:
    rnd = random.Random(20261122)
    vectors = {
        "drbg": {"seed": 7, "first_32_bytes": DeterministicRandom(7).random_bytes(32).hex()},
        "field": [field_ops(p, rnd) for p in PRIMES],
        "quantize": [quantization(p, rnd) for p in PRIMES],
        "lcc": [
            lcc_share(p, k, t, n, seed, rnd)
            for p, k, t, n, seed in [
                (2**31 - 1, 2, 2, 6, 1),
                (2**61 - 1, 3, 1, 5, 2),
                (65537, 1, 3, 7, 3),
            ]
        ],
    }
    OUT.write_text(json.dumps(vectors, indent=1) + "\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
