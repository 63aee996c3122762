"""Simulate a federation on your own image domains: does SecFPP find them, and does it pay?

``python -m demo.simulate --domain cats=./photos/cats --domain ./sketches.csv --seeds 3``
runs, per seed, the in-process federation of :mod:`bench.accuracy.run` (the real coordinator app,
the real participant engines, coded SecPC on the shipped ``tiny-offline`` CLIP:
:func:`demo.simulation.simulate`) on the given domains, each given to a group of participants
with Dirichlet(``alpha``) label skew inside it, and reports per seed

* the clusters after every round (members and their true domains), their **purity** against
  the given domains (:func:`demo.report.cluster_purity`), the round the domains **parted**
  (purity >= 0.9, as ``bench.clustering.split_rate``) and the round every domain was
  **found** (exactly one cluster per domain, as ``bench.clustering.signal_replay``),
  membership changes after parting;
* **false splits**: per round, the domains whose participants sit in more than one cluster;
* every method's held-out **accuracy** per participant, its mean and 10th percentile: SecFPP,
  PromptFL, local training and SecFPP without clustering by default
  (:data:`bench.accuracy.methods.METHODS`);

and writes ``OUT/simulate.json`` and ``OUT/simulate.png``. A domain is a registered name
(``python -m demo.simulate --list``), a folder ``ROOT/<class>/<image>`` or a CSV file
(:mod:`demo.data.files`), as ``NAME=PATH`` or ``PATH``. Settings come from flags or a spec file
(``--spec FILE.json`` or ``.yaml``; flags given on the command line win), see
:data:`SPEC_KEYS` and ``docs/how-to/simulate.md``.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse
import json
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from secfpp.federation import DEFAULT_SIGNAL, SIGNALS

__all__ = ["SPEC_KEYS", "SimulateSpec", "analyse_clusters", "load_spec", "main", "run"]

DEFAULT_METHODS = ("secfpp", "promptfl", "local", "secfpp-no-clustering")
PARTED_PURITY = 0.9

#: Every key a spec file may hold (the flag of the same name, ``_`` for ``-``).
SPEC_KEYS = (
    "domains",
    "participants",
    "alpha",
    "rounds",
    "epochs",
    "seeds",
    "images",
    "test_images",
    "min_size",
    "methods",
    "clustering",
    "min_aggregation_size",
    "lr",
    "signal",
    "out",
)


@dataclass
class DomainEntry:
    """One domain of a spec: its text (name, ``NAME=PATH`` or ``PATH``), the participants'
    share or group size, and (folders and CSVs) the zero-shot prompt."""

    text: str
    share: int = 1
    prompt: str | None = None


@dataclass
class SimulateSpec:
    """What to simulate (defaults: the issue-29 setting, 8 participants, 3 rounds, 2 seeds).

    ``shares`` of the domains are scaled to ``participants`` by :func:`demo.partition.group_sizes`
    (give the group sizes themselves as shares and ``participants`` their sum for exact sizes);
    ``images`` / ``test_images``: training and held-out images per participant (mean);
    ``clustering``: the federation's clustering policy (the coordinator's split settings, e.g.
    ``{"false_split_rate": 0.05}``; empty: its defaults).
    """

    domains: list[DomainEntry] = field(default_factory=list)
    participants: int | None = None
    alpha: float = 0.5
    rounds: int = 3
    epochs: int = 2
    seeds: list[int] = field(default_factory=lambda: [0, 1])
    images: int = 120
    test_images: int = 60
    min_size: int = 10
    methods: list[str] = field(default_factory=lambda: list(DEFAULT_METHODS))
    clustering: dict[str, Any] = field(default_factory=dict)
    min_aggregation_size: int = 3
    lr: float = 0.01
    signal: str = DEFAULT_SIGNAL
    out: Path = Path("runs/simulate")
    base: Path = Path()


def _entry(item: Any, where: str) -> DomainEntry:
    if isinstance(item, str):
        text, at, share = item.rpartition("@")
        return DomainEntry(text, _positive(share, where)) if at else DomainEntry(item)
    if isinstance(item, Mapping):
        unknown = set(item) - {"name", "path", "share", "prompt"}
        if unknown or not ("name" in item or "path" in item):
            raise ValueError(
                f"{where}: a domain is a text or a mapping of name, path, share, prompt "
                f"(name or path required), not {dict(item)}"
            )
        name, path = item.get("name"), item.get("path")
        text = f"{name}={path}" if name and path else str(path or name)
        prompt = item.get("prompt")
        if prompt is not None and "{}" not in str(prompt):
            raise ValueError(f"{where}: prompt must contain '{{}}', not {prompt!r}")
        return DomainEntry(text, _positive(item.get("share", 1), where), prompt)
    raise ValueError(f"{where}: a domain is a text or a mapping, not {item!r}")


def _positive(value: Any, where: str) -> int:
    if isinstance(value, bool) or not str(value).isdigit() or int(value) < 1:
        raise ValueError(f"{where}: a share must be a positive integer, not {value!r}")
    return int(value)


def load_spec(path: Path) -> dict[str, Any]:
    """The mapping of a JSON or YAML spec file, its keys checked against :data:`SPEC_KEYS`."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except OSError as exc:
        raise ValueError(f"--spec {path}: cannot read it ({exc.strerror})") from None
    except UnicodeDecodeError as exc:
        raise ValueError(f"--spec {path}: not UTF-8 text ({exc})") from None
    if path.suffix.lower() in (".yaml", ".yml"):
        try:
            import yaml
        except ImportError:
            raise ValueError(f"--spec {path}: YAML needs pyyaml; use JSON instead") from None
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ValueError(f"--spec {path}: not valid YAML ({exc})") from None
    else:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"--spec {path}: not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ValueError(f"--spec {path}: the top level must be a mapping of settings")
    unknown = sorted(set(data) - set(SPEC_KEYS))
    if unknown:
        raise ValueError(f"--spec {path}: unknown keys {unknown}; allowed: {list(SPEC_KEYS)}")
    return data


def build_spec(args: argparse.Namespace, given: set[str]) -> SimulateSpec:
    """The spec of a spec file (``args.spec``) overridden by the flags named in ``given``."""
    spec = SimulateSpec()
    values: dict[str, Any] = {}
    where = "command line"
    if args.spec is not None:
        values = load_spec(args.spec)
        spec.base = args.spec.resolve().parent
        where = str(args.spec)
    for key in given & set(SPEC_KEYS):
        values[key] = getattr(args, key)
    for key, value in values.items():
        if value is None:
            continue
        if key == "domains":
            spec.domains = [_entry(d, f"{where}, domain {i + 1}") for i, d in enumerate(value)]
        elif key == "seeds":
            spec.seeds = list(range(value)) if isinstance(value, int) else [int(s) for s in value]
        elif key == "clustering":
            spec.clustering = dict(value)
        elif key == "out":
            spec.out = Path(value)
        else:
            setattr(spec, key, value)
    return spec


def _check(spec: SimulateSpec) -> tuple[str, int]:
    """Register the domains; return the setting text and the participant count.

    Raises:
        ValueError: a bad domain, method or number (the message says which).
    """
    from bench.accuracy.methods import METHODS
    from demo.data.registry import resolve_domain
    from secfpp.federation import ClusteringPolicy

    if not spec.domains:
        raise ValueError("no domains: give --domain (repeatable) or 'domains' in --spec")
    names = []
    for entry in spec.domains:
        domain = resolve_domain(entry.text, base=spec.base, prompt_template=entry.prompt)
        if domain.name in names:
            raise ValueError(f"domain {domain.name!r} is given twice")
        names.append(domain.name)
    shares = [e.share for e in spec.domains]
    participants = spec.participants if spec.participants is not None else max(8, sum(shares))
    unknown = [m for m in spec.methods if m not in METHODS]
    if unknown or not spec.methods:
        raise ValueError(f"methods must be among {list(METHODS)}, not {spec.methods}")
    for key in ("rounds", "epochs", "images", "test_images", "min_size", "min_aggregation_size"):
        if int(getattr(spec, key)) < 1:
            raise ValueError(f"{key} must be at least 1, not {getattr(spec, key)}")
    if not spec.alpha > 0:
        raise ValueError(f"alpha must be positive, not {spec.alpha}")
    if not spec.seeds:
        raise ValueError("seeds: give at least one")
    try:
        ClusteringPolicy(**spec.clustering)
    except Exception as exc:  # pydantic's ValidationError: the policy's own message
        raise ValueError(f"clustering: {exc}") from None
    text = "+".join(n if s == 1 else f"{n}@{s}" for n, s in zip(names, shares, strict=True))
    return text, participants


def analyse_clusters(
    members: Sequence[Sequence[Sequence[str]]], domains: Mapping[str, str]
) -> dict[str, Any]:
    """What the clusters after each round say about the true ``domains`` (participant -> name).

    Returns ``clusters`` (count per round), ``purity`` per round, ``parted_round`` (first with
    purity >= 0.9, or None), ``found_round`` (first where every domain is exactly one cluster),
    ``changes_after_parted`` (rounds after ``parted_round`` whose membership differs from the
    round before), ``false_splits`` (per round: the domains whose participants are in more
    than one cluster) and ``false_split`` (any such round).
    """
    from demo.report import cluster_purity

    purity = [cluster_purity(r, domains) for r in members]  # type: ignore[arg-type]  # names
    n_domains = len(set(domains.values()))
    found = [
        len(r) == n_domains and all(len({domains[m] for m in c}) == 1 for c in r) for r in members
    ]
    fragmented = [
        sorted(
            d for d in set(domains.values()) if sum(any(domains[m] == d for m in c) for c in r) > 1
        )
        for r in members
    ]
    parted = next((k + 1 for k, p in enumerate(purity) if p >= PARTED_PURITY), None)
    changes = 0
    if parted is not None:
        canon = [sorted(sorted(c) for c in r) for r in members]
        changes = sum(a != b for a, b in zip(canon[parted - 1 :], canon[parted:], strict=False))
    return {
        "clusters": [len(r) for r in members],
        "purity": [round(p, 4) for p in purity],
        "parted_round": parted,
        "found_round": next((k + 1 for k, f in enumerate(found) if f), None),
        "changes_after_parted": changes,
        "false_splits": fragmented,
        "false_split": any(fragmented),
    }


def _summary(seeds: Sequence[dict[str, Any]], methods: Sequence[str]) -> dict[str, Any]:
    out: dict[str, Any] = {
        "seeds": len(seeds),
        "parted": sum(s["clustering"]["parted_round"] is not None for s in seeds),
        "found": sum(s["clustering"]["found_round"] is not None for s in seeds),
        "false_split_seeds": sum(s["clustering"]["false_split"] for s in seeds),
        "changes_after_parted": sum(s["clustering"]["changes_after_parted"] for s in seeds),
        "methods": {},
    }
    for method in methods:
        means = [s["methods"][method]["mean"] for s in seeds if method in s["methods"]]
        if means:
            out["methods"][method] = {
                "mean": round(float(np.mean(means)), 5),
                "std": round(float(np.std(means)), 5),
                "p10": round(float(np.mean([s["methods"][method]["p10"] for s in seeds])), 5),
            }
    return out


def run(spec: SimulateSpec, *, command: str = "python -m demo.simulate") -> dict[str, Any]:
    """Simulate every seed of ``spec``; write ``simulate.json`` and ``simulate.png`` into
    ``spec.out`` and return the JSON's content."""
    from bench.accuracy.methods import BenchConfig
    from bench.accuracy.run import run_unit

    setting, participants = _check(spec)
    methods = list(dict.fromkeys(["secfpp", *spec.methods]))  # SecFPP: the clusters
    bench = BenchConfig(
        rounds=spec.rounds,
        epochs=spec.epochs,
        lr=spec.lr,
        min_aggregation_size=spec.min_aggregation_size,
        clustering=dict(spec.clustering),
        signal=spec.signal,
    )
    started = time.monotonic()
    seeds: list[dict[str, Any]] = []
    groups: dict[str, int] = {}
    for seed in spec.seeds:
        unit = run_unit(
            setting,
            seed,
            methods,
            bench,
            participants=participants,
            images=spec.images,
            test_images=spec.test_images,
            alpha=spec.alpha,
            min_size=spec.min_size,
        )
        members = unit["methods"]["secfpp"]["members"]
        domains = unit["participants"]
        groups = {d: list(domains.values()).count(d) for d in dict.fromkeys(domains.values())}
        clustering = analyse_clusters(members, domains)
        clustering["members"] = [[[f"{m} ({domains[m]})" for m in c] for c in r] for r in members]
        seeds.append(
            {
                "seed": seed,
                "clustering": clustering,
                "methods": {
                    m: {k: unit["methods"][m][k] for k in ("mean", "p10", "accuracy")}
                    for m in spec.methods
                    if m in unit["methods"]
                },
                "seconds": unit["seconds"],
            }
        )
        _print_seed(seeds[-1], spec.methods)
    result = {
        "meta": {
            "command": command,
            "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "setting": setting,
            "group_sizes": groups,
            "participants": participants,
            "alpha": spec.alpha,
            "rounds": spec.rounds,
            "epochs": spec.epochs,
            "images": spec.images,
            "test_images": spec.test_images,
            "bench": bench.as_dict(),
            "backbone": "tiny-offline",
            "seconds": round(time.monotonic() - started, 1),
        },
        "summary": _summary(seeds, spec.methods),
        "seeds": seeds,
    }
    spec.out.mkdir(parents=True, exist_ok=True)
    (spec.out / "simulate.json").write_text(json.dumps(result, indent=1) + "\n")
    plot(result, spec.out / "simulate.png")
    return result


def _print_seed(row: Mapping[str, Any], methods: Sequence[str]) -> None:
    c = row["clustering"]
    print(
        f"seed {row['seed']}: clusters {c['clusters']}, purity "
        + " ".join(f"{p:.2f}" for p in c["purity"])
        + f", parted at {c['parted_round'] or '-'}, all found at {c['found_round'] or '-'}, "
        f"false splits {sum(bool(f) for f in c['false_splits'])} rounds "
        f"({row['seconds']:.0f} s)",
        flush=True,
    )
    for method in methods:
        if method in row["methods"]:
            m = row["methods"][method]
            print(f"  {method:>22}: mean {m['mean']:.3f}, p10 {m['p10']:.3f}", flush=True)


def plot(result: Mapping[str, Any], path: Path) -> Path:
    """PNG: purity and cluster count per round per seed; mean and 10th-percentile accuracy per
    method over the seeds."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    for row in result["seeds"]:
        c = row["clustering"]
        rounds = list(range(1, len(c["purity"]) + 1))
        (line,) = left.plot(rounds, c["purity"], marker="o", label=f"seed {row['seed']}")
        for r, count in zip(rounds, c["clusters"], strict=True):
            left.annotate(str(count), (r, c["purity"][r - 1]), textcoords="offset points",
                          xytext=(4, 4), fontsize=8, color=line.get_color())  # fmt: skip
    left.axhline(PARTED_PURITY, color="grey", linestyle="--", linewidth=1)
    n_rounds = max(len(row["clustering"]["purity"]) for row in result["seeds"])
    left.set_xticks(range(1, n_rounds + 1))
    left.set_ylim(0, 1.05)
    left.set_xlabel("round")
    left.set_ylabel("purity against the given domains")
    left.set_title("SecFPP's clusters (numbers: clusters)")
    left.grid(alpha=0.3)
    left.legend(fontsize=8, loc="lower right")
    summary = result["summary"]["methods"]
    names = list(summary)
    xs = np.arange(len(names))
    right.bar(xs, [summary[m]["mean"] for m in names], yerr=[summary[m]["std"] for m in names],
              color="tab:blue", alpha=0.8, label="mean (+- std over seeds)")  # fmt: skip
    right.scatter(xs, [summary[m]["p10"] for m in names], color="tab:red", zorder=3,
                  label="10th percentile")  # fmt: skip
    right.set_xticks(xs, names, rotation=15)
    right.set_ylim(0, 1)
    right.set_ylabel("held-out accuracy per participant")
    right.set_title(f"{result['meta']['setting']}, {len(result['seeds'])} seed(s)")
    right.grid(alpha=0.3, axis="y")
    right.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m demo.simulate",
        description=__doc__.splitlines()[0],
        epilog="Every flag but --spec, --list and --quick may also be a key of the spec file.",
    )
    parser.add_argument("--spec", type=Path, help="a JSON or YAML spec file (docs/how-to)")
    parser.add_argument(
        "--domain",
        dest="domains",
        action="append",
        metavar="DOMAIN[@SHARE]",
        help="a registered domain, NAME=FOLDER or NAME=FILE.csv (repeat: one per domain); "
        "@SHARE: its share of the participants (default 1)",
    )
    parser.add_argument("--participants", type=int, help="default: max(8, sum of the shares)")
    parser.add_argument("--alpha", type=float, help="Dirichlet label skew (default 0.5)")
    parser.add_argument("--rounds", type=int, help="default 3")
    parser.add_argument("--epochs", type=int, help="local epochs per round (default 2)")
    parser.add_argument("--seeds", type=int, help="seeds 0..N-1 (default 2)")
    parser.add_argument("--images", type=int, help="training images per participant (120)")
    parser.add_argument("--test-images", type=int, help="held-out images per participant (60)")
    parser.add_argument("--min-size", type=int, help="fewest images a participant gets (10)")
    parser.add_argument(
        "--methods", nargs="+", help=f"methods to compare (default {' '.join(DEFAULT_METHODS)})"
    )
    parser.add_argument(
        "--clustering",
        action="append",
        metavar="KEY=VALUE",
        help="a clustering-policy setting of the federation (repeat), VALUE as JSON, e.g. "
        "false_split_rate=0.05",
    )
    parser.add_argument("--min-aggregation-size", type=int, help="smallest cluster (3)")
    parser.add_argument("--lr", type=float, help="prompt learning rate (0.01)")
    parser.add_argument("--signal", choices=SIGNALS, help=f"what SecPC clusters ({DEFAULT_SIGNAL})")
    parser.add_argument("--out", type=Path, help="output folder (runs/simulate)")
    parser.add_argument("--list", action="store_true", help="list the registered domains")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="smoke run: 1 seed, 1 round of 1 epoch, 6 participants, 16 + 8 images, min size 5",
    )
    return parser


def _clustering(pairs: Sequence[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"--clustering takes KEY=VALUE, not {pair!r}")
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError:
            out[key] = value
    return out


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.list:
        from demo.data import DOMAINS

        for name, domain in DOMAINS.items():
            seen = "pretrained" if domain.pretrained else "unseen by the backbone"
            print(f"{name:20} {domain.role:9} {seen:24} {len(domain.class_names)} classes")
        return 0
    given = {k for k, v in vars(args).items() if v is not None and k not in ("spec", "list")}
    try:
        if args.clustering is not None:
            args.clustering = _clustering(args.clustering)
        if args.quick:
            quick = {"seeds": 1, "rounds": 1, "epochs": 1, "participants": 6, "images": 16,
                     "test_images": 8, "min_size": 5}  # fmt: skip
            for key, value in quick.items():
                if key not in given:
                    setattr(args, key, value)
                    given.add(key)
        given.discard("quick")
        spec = build_spec(args, given)
        command = "python -m demo.simulate " + " ".join(sys.argv[1:] if argv is None else argv)
        result = run(spec, command=command)
    except ValueError as exc:  # DomainLoadError included: names the file (and line)
        print(f"error: {exc}", file=sys.stderr)
        return 2
    s = result["summary"]
    print(
        f"\n{s['seeds']} seed(s): parted (purity >= {PARTED_PURITY}) in {s['parted']}, every "
        f"domain found in {s['found']}, false splits in {s['false_split_seeds']}; "
        f"written {spec.out / 'simulate.json'} and {spec.out / 'simulate.png'}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
