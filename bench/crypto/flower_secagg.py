"""Flower's SecAgg+ measured for comparison with our committee sharing (issue 17); not a test.

What runs: **Flower's real code**, in process. Each participant is a real Flower
``ClientApp(client_fn, mods=[secaggplus_mod])`` (the setup of Flower's secure-aggregation
example) with its own ``Context``; the server is Flower's real
``flwr.server.workflow.SecAggPlusWorkflow`` driven with a ``LegacyContext`` (``FedAvg``,
``SimpleClientManager``) exactly as ``DefaultWorkflow`` calls it for one fit round. Nothing of
the protocol is re-implemented here. What this module supplies is the transport: a ``Grid``
(``_BenchGrid``) whose ``send_and_receive`` carries each message the way Flower 1.41 puts
it on the wire (the message's tree of inflatable objects, each ``deflate()``-d to bytes,
then ``inflate_object_from_contents`` on the receiving side) and calls the destination's
``ClientApp`` in this process, one participant after the other. Flower's Simulation
Engine was not used: it needs Ray (``flwr[simulation]`` pins ``ray==2.55.1``), and with Ray
each participant's compute would run in worker processes whose CPU time cannot be
attributed to the participant on a 2-core shared machine; in process, every call is timed
on its own.

Setting (defaults, the issue's): ``d = 100,000`` float32 parameters per participant,
``N`` in {100, 300, 1000}, a fraction ``0.25`` of participants (drawn with ``--seed``)
dropping *after sharing*: they answer the setup and share-keys stages, then send no
masked vector and take no part in unmasking, so the server reconstructs their ``sk1`` and
removes their pairwise masks. Modes:

* **neighbourhood**: ``SecAggPlusWorkflow(num_shares=15, reconstruction_threshold=4)``.
  Flower has no default ``num_shares`` (its example app uses 3); 15 is the issue's earlier
  figure. In Flower ``num_shares`` counts the share holders *including the client
  itself* (ring offsets -7..+7), so each client has 14 peers. It must be odd: an even
  integer makes Flower 1.41 announce ``num_shares`` shares but build ``num_shares + 1``
  neighbours, and the clients fail. The threshold is 4 because Flower aborts the round
  when any client has fewer than ``t`` live share holders: with 25 % random dropouts
  among 15 holders, ``t >= 5`` fails with probability >= 0.11 at N = 1000
  (``t = 8``, about half, almost surely). The threshold only changes the cost of Shamir
  splitting (``O(num_shares * t)``); reconstruction uses every share received.
* **all-to-all**: ``num_shares=1.0`` (Flower's "all sampled clients", so ``N`` holders) and
  ``reconstruction_threshold=0.5`` (``t = N / 2``), at N = 100 only: Flower's Shamir runs in
  pure Python over GF(2^128) (pycryptodome), 16-byte chunk by chunk, and its ``sk1`` is a
  306-byte PEM (20 chunks): splitting it for ``N = 300, t = 150`` costs about 21 s per
  client, and the server's reconstruction from 225 shares about 52 s per dropped client,
  hours at N = 300 on one core.

What is counted, in CPU seconds (``time.process_time``, one process, one BLAS thread;
run it under ``taskset -c 1``):

* **client**: each call of a participant's ``ClientApp`` (Flower's mod and message
  handling included), less its local "training" (the inner ``NumPyClient.fit``, which
  returns a fixed random update and is timed by a mod inside ``secaggplus_mod``). Shown
  per stage (mean over the clients that ran it), as the mean over surviving clients of
  their four stages, the max, and the mean of a dropped client (two stages).
* **server**: the workflow's four stages, less the time spent inside the grid (clients'
  compute, both sides' (de)serialisation) and less the strategy's ``configure_fit`` /
  ``aggregate_fit`` (FedAvg re-averaging the already-aggregated vector; shown apart).
* **serde**: ``deflate`` + ``inflate`` of every message, both sides, shown apart.
* **summed**: every client's compute (dropped ones included) plus the server's, the
  figure comparable with ``python -m bench.crypto.committee``'s stage total (serde not included).
* **bytes**: a surviving client's sent and received bytes, summed over the four stages:
  the deflated objects of its messages (Flower's wire payload; gRPC framing not counted).

Each run is checked: the aggregate the workflow leaves in ``context.state`` must equal
the plaintext weighted mean of the surviving clients' updates up to quantisation (max
abs error printed; Flower's defaults: clipping 8, 2^22 levels, modulus 2^32).

Install (a separate venv: flwr must not move the main venv's numpy/torch pins; it pulls
no torch and no Ray)::

    python3 -m venv .venv-flower
    .venv-flower/bin/pip install flwr==1.41.0 numpy==2.4.6

Tested with **flwr 1.41.0** (1.42.0, the newest, needs ``certifi>=2026.10.19``, which the
package index reachable from this machine does not have).

Usage:  .venv-flower/bin/python -m bench.crypto.flower_secagg [--quick] [--n 100 300 1000]
            [--all-to-all 100] [--d 100000] [--neighbours 15] [--threshold 4]
            [--dropout 0.25] [--seed 0] [--json PATH]

Without flwr installed it prints how to install it and exits with status 2.
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import os
import random
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from uuid import uuid4

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import numpy as np

FLWR_VERSION = "1.41.0"
INSTALL = (
    "python3 -m venv .venv-flower && "
    f".venv-flower/bin/pip install flwr=={FLWR_VERSION} numpy==2.4.6"
)
WHAT_RUNS = (
    "Flower's real SecAggPlusWorkflow + ClientApp(mods=[secaggplus_mod]), in process "
    "(in-memory Grid with Flower's deflate/inflate wire format)"
)
STAGES = ("setup", "share_keys", "collect_masked_vectors", "unmask")
NUM_EXAMPLES = 500  # each client's FedAvg weight (Flower's max_weight defaults to 1000)
QUICK_D = 1_000


@dataclass(frozen=True)
class Setting:
    """One round to run: ``n`` clients, Flower's ``num_shares`` and threshold arguments."""

    mode: str  # "neighbourhood" or "all-to-all"
    n: int
    d: int
    num_shares: int | float  # passed to SecAggPlusWorkflow; 1.0 means all N clients
    threshold: int | float  # reconstruction_threshold (int, or a fraction of num_shares)
    dropout: float
    seed: int

    @property
    def label(self) -> str:
        if self.mode == "all-to-all":
            return f"all-to-all N={self.n}"
        return f"k={self.num_shares} N={self.n}"


@dataclass
class Result:
    """Figures of one round (CPU seconds, bytes); see the module docstring."""

    label: str
    mode: str
    n: int
    d: int
    share_holders: int = 0  # per client, itself included (Flower's state.num_shares)
    threshold: int = 0
    dropped: int = 0
    completed: bool = False
    client_stage_s: dict[str, float] = field(default_factory=dict)  # mean per client
    client_s: float = 0.0  # mean over surviving clients, four stages
    client_max_s: float = 0.0
    dropped_client_s: float = 0.0  # mean over dropped clients (setup + share keys)
    server_stage_s: dict[str, float] = field(default_factory=dict)
    server_s: float = 0.0
    strategy_s: float = 0.0  # FedAvg configure_fit + aggregate_fit (not in server_s)
    serde_s: float = 0.0  # all parties, deflate + inflate
    summed_s: float = 0.0  # all clients' compute + server_s
    client_sent_bytes: float = 0.0  # mean over surviving clients
    client_received_bytes: float = 0.0
    server_received_bytes: int = 0
    max_abs_error: float = float("nan")
    wall_s: float = 0.0


# ---------------------------------------------------------------- pure helpers (tested)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.crypto.flower_secagg",
        description="Flower SecAgg+ (real workflow, in process): CPU seconds and bytes.",
    )
    parser.add_argument("--quick", action="store_true", help="smoke run: small N and d")
    parser.add_argument("--n", type=int, nargs="+", default=None, help="neighbourhood N values")
    parser.add_argument(
        "--all-to-all", type=int, nargs="*", default=None, help="N values for num_shares = N"
    )
    parser.add_argument("--d", type=int, default=None, help="vector length")
    parser.add_argument(
        "--neighbours", type=int, default=15, help="Flower num_shares (odd, self included)"
    )
    parser.add_argument("--threshold", type=int, default=4, help="neighbourhood threshold t")
    parser.add_argument(
        "--a2a-threshold", type=float, default=0.5, help="all-to-all threshold, fraction of N"
    )
    parser.add_argument("--dropout", type=float, default=0.25, help="fraction dropping")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, default=None, help="write the results here")
    args = parser.parse_args(argv)
    if args.quick:
        args.n = args.n or [10, 20]
        args.all_to_all = [10] if args.all_to_all is None else args.all_to_all
        args.d = args.d or QUICK_D
        if args.neighbours > min(args.n):
            args.neighbours = 7
        args.threshold = min(args.threshold, 3)
    else:
        args.n = args.n or [100, 300, 1000]
        args.all_to_all = [100] if args.all_to_all is None else args.all_to_all
        args.d = args.d or 100_000
    if args.neighbours % 2 == 0 or args.neighbours < 3:
        parser.error("--neighbours must be odd and >= 3 (Flower fails on even num_shares)")
    if not 2 <= args.threshold < args.neighbours:
        parser.error("--threshold must be in [2, neighbours)")
    if not 0.0 <= args.dropout < 1.0:
        parser.error("--dropout must be in [0, 1)")
    return args


def settings(args: argparse.Namespace) -> list[Setting]:
    out = [
        Setting(
            "neighbourhood", n, args.d, args.neighbours, args.threshold, args.dropout, args.seed
        )
        for n in args.n
    ]
    out += [
        Setting("all-to-all", n, args.d, 1.0, args.a2a_threshold, args.dropout, args.seed)
        for n in args.all_to_all
    ]
    return out


def growth(base: float, value: float) -> float:
    """How many times ``value`` is ``base`` (nan when ``base`` is zero)."""
    return value / base if base else float("nan")


def growth_rows(results: Iterable[Result]) -> list[tuple[str, ...]]:
    """Growth of the neighbourhood figures from the smallest N to every larger one."""
    rows = sorted(
        (r for r in results if r.mode == "neighbourhood" and r.completed), key=lambda r: r.n
    )
    if len(rows) < 2:
        return []
    base = rows[0]
    out: list[tuple[str, ...]] = []
    for r in rows[1:]:
        out.append(
            (
                f"N {base.n} -> {r.n}",
                f"x{growth(base.n, r.n):.2f}",
                f"x{growth(base.client_s, r.client_s):.2f}",
                f"x{growth(base.server_s, r.server_s):.2f}",
                f"x{growth(base.summed_s, r.summed_s):.2f}",
                f"x{growth(base.client_sent_bytes, r.client_sent_bytes):.2f}",
            )
        )
    return out


def format_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A plain-text table, columns padded to their widest cell."""
    cells = [list(header), *[list(r) for r in rows]]
    widths = [max(len(c[i]) for c in cells) for i in range(len(header))]

    def line(row: Sequence[str]) -> str:
        return "  ".join(
            cell.ljust(w) if i == 0 else cell.rjust(w)
            for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        ).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(cells[0]), rule, *[line(r) for r in cells[1:]]])


def _mb(x: float) -> str:
    return f"{x / 1e6:.3f}"


def report(results: Sequence[Result]) -> str:
    """Every table: the main figures, the per-stage split and the growth rates."""
    main_rows = [
        (
            r.label,
            str(r.share_holders),
            str(r.threshold),
            str(r.dropped),
            "yes" if r.completed else "HALTED",
            f"{r.client_s:.3f}",
            f"{r.client_max_s:.3f}",
            f"{r.dropped_client_s:.3f}",
            f"{r.server_s:.2f}",
            f"{r.summed_s:.1f}",
            _mb(r.client_sent_bytes),
            _mb(r.client_received_bytes),
            f"{r.serde_s:.1f}",
            f"{r.strategy_s:.2f}",
            f"{r.max_abs_error:.1e}",
        )
        for r in results
    ]
    main = format_table(
        (
            "setting",
            "holders",
            "t",
            "dropped",
            "done",
            "client s",
            "client max",
            "dropped cl s",
            "server s",
            "summed s",
            "sent MB/cl",
            "recv MB/cl",
            "serde s",
            "FedAvg s",
            "max err",
        ),
        main_rows,
    )
    stage_rows = [
        (
            r.label,
            *(f"{r.client_stage_s.get(s, float('nan')):.4f}" for s in STAGES),
            *(f"{r.server_stage_s.get(s, float('nan')):.2f}" for s in STAGES),
        )
        for r in results
    ]
    short = ("setup", "share", "masked", "unmask")
    stages = format_table(
        ("setting", *(f"cl {s}" for s in short), *(f"srv {s}" for s in short)), stage_rows
    )
    parts = [
        "Flower SecAgg+ round, CPU seconds (time.process_time) and bytes",
        f"what runs: {WHAT_RUNS}",
        "",
        main,
        "",
        "per stage: client = mean per client that ran the stage, server = seconds",
        stages,
    ]
    grow = growth_rows(results)
    if grow:
        parts += [
            "",
            "growth (neighbourhood)",
            format_table(("", "N", "client", "server", "summed", "bytes/client"), grow),
        ]
    return "\n".join(parts)


# ---------------------------------------------------------------- the Flower run


def _load_flwr() -> SimpleNamespace | None:
    """Flower's pieces, or None when flwr is not installed."""
    try:
        import flwr
        import flwr.compat.common.recorddict_compat as compat
        from flwr.app import ConfigRecord, Context, Message, RecordDict
        from flwr.client import ClientApp, NumPyClient
        from flwr.client.mod import secaggplus_mod
        from flwr.common import ndarrays_to_parameters, parameters_to_ndarrays
        from flwr.common.constant import SUPERLINK_NODE_ID
        from flwr.common.secure_aggregation.secaggplus_constants import RECORD_KEY_CONFIGS, Key
        from flwr.server import ServerConfig
        from flwr.server.client_manager import SimpleClientManager
        from flwr.server.compat.grid_client_proxy import GridClientProxy
        from flwr.server.compat.legacy_context import LegacyContext
        from flwr.server.strategy import FedAvg
        from flwr.server.workflow import SecAggPlusWorkflow
        from flwr.server.workflow.constant import MAIN_CONFIGS_RECORD, MAIN_PARAMS_RECORD
        from flwr.server.workflow.constant import Key as WorkflowKey
        from flwr.serverapp.grid import Grid
        from flwr.supercore.inflatable.inflatable_object import get_all_nested_objects
        from flwr.supercore.inflatable.inflatable_utils import inflate_object_from_contents
        from flwr.supercore.task_identity import TaskIdentity
    except ImportError:
        return None
    return SimpleNamespace(
        version=str(flwr.__version__),
        compat=compat,
        ConfigRecord=ConfigRecord,
        Context=Context,
        Message=Message,
        RecordDict=RecordDict,
        ClientApp=ClientApp,
        NumPyClient=NumPyClient,
        secaggplus_mod=secaggplus_mod,
        ndarrays_to_parameters=ndarrays_to_parameters,
        parameters_to_ndarrays=parameters_to_ndarrays,
        SUPERLINK_NODE_ID=SUPERLINK_NODE_ID,
        RECORD_KEY_CONFIGS=RECORD_KEY_CONFIGS,
        STAGE_KEY=Key.STAGE,
        ServerConfig=ServerConfig,
        SimpleClientManager=SimpleClientManager,
        GridClientProxy=GridClientProxy,
        LegacyContext=LegacyContext,
        FedAvg=FedAvg,
        SecAggPlusWorkflow=SecAggPlusWorkflow,
        MAIN_CONFIGS_RECORD=MAIN_CONFIGS_RECORD,
        MAIN_PARAMS_RECORD=MAIN_PARAMS_RECORD,
        CURRENT_ROUND=WorkflowKey.CURRENT_ROUND,
        Grid=Grid,
        get_all_nested_objects=get_all_nested_objects,
        inflate_object_from_contents=inflate_object_from_contents,
        TaskIdentity=TaskIdentity,
    )


def _update(seed: int, nid: int, d: int) -> np.ndarray:
    return np.random.default_rng([seed, nid]).uniform(-1.0, 1.0, d).astype(np.float32)


class _Meter:
    """CPU seconds spent inside the grid, by whom."""

    def __init__(self) -> None:
        self.fit = 0.0  # inner NumPyClient.fit (not SecAgg+)
        self.serde = 0.0
        self.client: dict[int, dict[str, float]] = {}
        self.sent: dict[int, int] = {}
        self.received: dict[int, int] = {}
        self.strategy = 0.0

    def inside_grid(self) -> float:
        return self.fit + self.serde + sum(sum(s.values()) for s in self.client.values())


def _run(fl: SimpleNamespace, s: Setting) -> Result:
    cpu = time.process_time
    random.seed(s.seed)  # Flower's ring shuffle and client sampling use `random`
    np.random.seed(s.seed)  # Flower's stochastic rounding uses np.random
    rng = random.Random(s.seed)
    node_ids = rng.sample(range(2, 2**62), s.n)  # Flower's node IDs are random integers
    dropped = set(rng.sample(node_ids, round(s.dropout * s.n)))
    meter = _Meter()
    key_stage = fl.STAGE_KEY
    cfg_key = fl.RECORD_KEY_CONFIGS

    numpy_client: Any = fl.NumPyClient
    grid_base: Any = fl.Grid

    class _Client(numpy_client):  # type: ignore[misc]
        def __init__(self, nid: int) -> None:
            self.nid = nid

        def fit(self, parameters: Any, config: Any) -> Any:
            return [_update(s.seed, self.nid, s.d)], NUM_EXAMPLES, {}

    def client_fn(context: Any) -> Any:
        return _Client(context.node_id).to_client()

    def fit_meter_mod(msg: Any, ctxt: Any, call_next: Callable[[Any, Any], Any]) -> Any:
        t0 = cpu()
        out = call_next(msg, ctxt)
        meter.fit += cpu() - t0
        return out

    app = fl.ClientApp(client_fn=client_fn, mods=[fl.secaggplus_mod, fit_meter_mod])
    contexts = {
        nid: fl.Context(run_id=1, node_id=nid, node_config={}, state=fl.RecordDict(), run_config={})
        for nid in node_ids
    }
    for nid in node_ids:
        meter.client[nid] = {}
        meter.sent[nid] = meter.received[nid] = 0

    def wire(msg: Any) -> tuple[str, dict[str, bytes], int]:
        objs = fl.get_all_nested_objects(msg)
        contents = {oid: obj.deflate() for oid, obj in objs.items()}
        return msg.object_id, contents, sum(len(c) for c in contents.values())

    def unwire(root: str, contents: dict[str, bytes]) -> Any:
        msg = fl.inflate_object_from_contents(root, contents)
        msg.metadata.__dict__["_message_id"] = root
        return msg

    class _BenchGrid(grid_base):  # type: ignore[misc]
        """Delivers each message to its client's ClientApp in this process."""

        def __init__(self) -> None:
            self._run: Any = None
            self._replies: dict[str, Any] = {}

        def set_run(self, run: Any) -> None:
            self._run = run

        @property
        def run(self) -> Any:
            return self._run

        def create_message(
            self,
            content: Any,
            message_type: str,
            dst_node_id: int,
            group_id: str,
            ttl: float | None = None,
        ) -> Any:
            return fl.Message(content, dst_node_id, message_type, ttl=ttl, group_id=group_id)

        def get_node_ids(self) -> list[int]:
            return list(node_ids)

        def push_messages(self, messages: Iterable[Any]) -> list[str]:
            ids = []
            for msg in messages:
                msg.metadata.__dict__["_message_id"] = str(uuid4())
                ids.append(msg.metadata.message_id)
                stage = str(msg.content.config_records[cfg_key][key_stage])
                nid = msg.metadata.dst_node_id
                if nid in dropped and stage in STAGES[2:]:
                    continue  # dropped after sharing: never answers again
                t0 = cpu()
                root, contents, size = wire(msg)
                t1 = cpu()
                received = unwire(root, contents)
                fit0 = meter.fit
                t2 = cpu()
                reply = app(received, contexts[nid])
                t3 = cpu()
                r_root, r_contents, r_size = wire(reply)
                r_msg = unwire(r_root, r_contents)
                t4 = cpu()
                meter.serde += (t1 - t0) + (t2 - t1) + (t4 - t3)
                meter.client[nid][stage] = (t3 - t2) - (meter.fit - fit0)
                meter.received[nid] += size
                meter.sent[nid] += r_size
                self._replies[msg.metadata.message_id] = r_msg
            return ids

        def pull_messages(self, message_ids: Iterable[str]) -> list[Any]:
            return [self._replies.pop(m) for m in message_ids if m in self._replies]

        def send_and_receive(
            self, messages: Iterable[Any], *, timeout: float | None = None
        ) -> list[Any]:
            return self.pull_messages(self.push_messages(messages))

    grid = _BenchGrid()
    tid = fl.TaskIdentity
    tid.task_id, tid.run_id, tid.node_id = 1, 1, fl.SUPERLINK_NODE_ID

    strategy = fl.FedAvg(
        fraction_fit=1.0,
        fraction_evaluate=0.0,
        min_fit_clients=s.n,
        min_evaluate_clients=0,
        min_available_clients=s.n,
    )
    for name in ("configure_fit", "aggregate_fit"):
        inner = getattr(strategy, name)

        def timed(*a: Any, _inner: Callable[..., Any] = inner, **k: Any) -> Any:
            t0 = cpu()
            try:
                return _inner(*a, **k)
            finally:
                meter.strategy += cpu() - t0

        setattr(strategy, name, timed)

    manager = fl.SimpleClientManager()
    for nid in node_ids:
        manager.register(fl.GridClientProxy(nid, grid, 1))
    server_ctx = fl.Context(
        run_id=1, node_id=0, node_config={}, state=fl.RecordDict(), run_config={}
    )
    context = fl.LegacyContext(
        context=server_ctx,
        config=fl.ServerConfig(num_rounds=1),
        strategy=strategy,
        client_manager=manager,
    )
    initial = fl.ndarrays_to_parameters([np.zeros(s.d, dtype=np.float32)])
    context.state.array_records[fl.MAIN_PARAMS_RECORD] = fl.compat.parameters_to_arrayrecord(
        initial, keep_input=True
    )
    context.state.config_records[fl.MAIN_CONFIGS_RECORD] = fl.ConfigRecord({fl.CURRENT_ROUND: 1})

    workflow = fl.SecAggPlusWorkflow(num_shares=s.num_shares, reconstruction_threshold=s.threshold)
    server_stage: dict[str, float] = {}
    returned: dict[str, bool] = {}
    captured: dict[str, Any] = {}
    for stage in STAGES:
        inner_stage = getattr(workflow, f"{stage}_stage")

        def timed_stage(
            g: Any, c: Any, state: Any, _inner: Callable[..., bool] = inner_stage, _s: str = stage
        ) -> bool:
            g0, st0, t0 = meter.inside_grid(), meter.strategy, cpu()
            ok = _inner(g, c, state)
            spent = cpu() - t0 - (meter.inside_grid() - g0) - (meter.strategy - st0)
            server_stage[_s] = spent
            returned[_s] = bool(ok)
            captured["state"] = state
            return ok

        setattr(workflow, f"{stage}_stage", timed_stage)

    gc.collect()
    wall0 = time.perf_counter()
    workflow(grid, context)
    wall = time.perf_counter() - wall0

    state = captured["state"]
    r = Result(label=s.label, mode=s.mode, n=s.n, d=s.d)
    r.share_holders = int(state.num_shares)
    r.threshold = int(state.threshold)
    r.dropped = len(dropped)
    r.completed = all(returned.get(st, False) for st in STAGES)
    survivors = [nid for nid in node_ids if nid not in dropped]
    for st in STAGES:
        vals = [meter.client[nid][st] for nid in node_ids if st in meter.client[nid]]
        r.client_stage_s[st] = float(np.mean(vals)) if vals else float("nan")
    per_survivor = [sum(meter.client[nid].values()) for nid in survivors]
    per_dropped = [sum(meter.client[nid].values()) for nid in dropped]
    r.client_s = float(np.mean(per_survivor))
    r.client_max_s = float(np.max(per_survivor))
    r.dropped_client_s = float(np.mean(per_dropped)) if per_dropped else 0.0
    r.server_stage_s = dict(server_stage)
    r.server_s = sum(server_stage.values())
    r.strategy_s = meter.strategy
    r.serde_s = meter.serde
    r.summed_s = sum(per_survivor) + sum(per_dropped) + r.server_s
    r.client_sent_bytes = float(np.mean([meter.sent[nid] for nid in survivors]))
    r.client_received_bytes = float(np.mean([meter.received[nid] for nid in survivors]))
    r.server_received_bytes = sum(meter.sent.values())
    r.wall_s = wall
    if r.completed:
        params = fl.compat.arrayrecord_to_parameters(
            context.state.array_records[fl.MAIN_PARAMS_RECORD], keep_input=True
        )
        got = fl.parameters_to_ndarrays(params)[0].astype(np.float64)
        want = np.zeros(s.d)
        for nid in survivors:
            want += _update(s.seed, nid, s.d)
        want /= len(survivors)  # equal weights (NUM_EXAMPLES each)
        r.max_abs_error = float(np.max(np.abs(got - want)))
    return r


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    fl = _load_flwr()
    if fl is None:
        print(
            "bench.crypto.flower_secagg: flwr is not installed in this interpreter "
            f"({sys.executable}).\nInstall it into a separate venv (it must not move the "
            f"main venv's pins):\n    {INSTALL}\nthen run:  .venv-flower/bin/python -m "
            "bench.crypto.flower_secagg",
            file=sys.stderr,
        )
        return 2
    logging.getLogger("flwr").setLevel(logging.ERROR)
    version = fl.version
    print(
        f"flwr {version} (tested with {FLWR_VERSION}), numpy {np.__version__}, "
        f"d = {args.d}, dropout {args.dropout:g} after sharing, seed {args.seed}"
    )
    results = []
    for s in settings(args):
        t0 = time.perf_counter()
        r = _run(fl, s)
        print(
            f"  ran {s.label}: client {r.client_s:.3f} s, server {r.server_s:.2f} s, "
            f"summed {r.summed_s:.1f} s, wall {time.perf_counter() - t0:.0f} s",
            flush=True,
        )
        results.append(r)
        gc.collect()
    print()
    print(report(results))
    if args.json is not None:
        payload = {
            "flwr": version,
            "what_runs": WHAT_RUNS,
            "d": args.d,
            "dropout": args.dropout,
            "seed": args.seed,
            "results": [asdict(r) for r in results],
            "growth": growth_rows(results),
        }
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(payload, indent=2) + "\n")
    return 0 if all(r.completed for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
