"""What the dashboard pages show, compared with what the API reports for the same rounds."""

from __future__ import annotations

import html
import re
from typing import Any

import numpy as np
import pytest

from secfpp.coordinator.dashboard.charts import Cell, heatmap
from secfpp.coordinator.db.engine import make_engine, make_sessionmaker
from secfpp.coordinator.rounds import store
from secfpp.crypto.dp import epsilon_for, epsilon_spent
from tests.support.asgi import TestClient
from tests.support.common import ADMIN, FakeClock
from tests.support.coordinator import FederationHarness
from tests.support.dashboard import login, report_accuracy


def _flat(page: str) -> str:
    """The page without whitespace between tags."""
    return re.sub(r">\s+<", "><", page)


def _titles(page: str) -> list[str]:
    svg = page.split('class="heatmap"')[1].split("</svg>")[0]
    return [html.unescape(t) for t in re.findall(r"<title>(.*?)</title>", svg)]


def _cluster_in(titles: list[str], label: str, number: int) -> str:
    for title in titles:
        name, span, what = re.match(r"(.*), rounds? ([\d-]+): (.*)", title).groups()  # type: ignore[union-attr]
        lo, _, hi = span.partition("-")
        if name == label and int(lo) <= number <= int(hi or lo):
            return what
    raise AssertionError(f"no cell for {label} in round {number}")


@pytest.mark.slow  # over 1.5 s on the 2-core machine: out of the inner loop (bash dev.sh quick)
def test_federation_page_matches_the_api(client: TestClient, harness: FederationHarness) -> None:
    h = harness
    reported = {}
    for _ in range(2):
        number = h.run_round()
        reported[number] = report_accuracy(h, number)
    login(client)
    page = _flat(client.get(f"/dashboard/federations/{h.id}").text)

    # Heatmap: round 1 trained all in cluster 0; round 2 in the clusters round 1 found.
    titles = _titles(page)
    names = {s.index: f"{s.index}: {s.name}" for s in h.sims}
    assert all(_cluster_in(titles, names[i], 1) == "cluster 0" for i in names)
    found = {tuple(c["members"]): c["cluster"] for c in h.status(1)["next_clusters"]}
    for members, cluster in found.items():
        for i in members:
            assert _cluster_in(titles, names[i], 2) == f"cluster {cluster}"

    # Split statistic, decoded counts: the event details of the API, nothing else.
    for number in (1, 2):
        events = h.status(number)["events"]
        clustering = next(e["detail"] for e in events if "split_ratios" in e["detail"])
        for cluster, ratio in clustering["split_ratios"].items():
            verdict = (
                "split"
                if any(s["parent"] == int(cluster) for s in clustering["splits"])
                else "kept"
            )
            p_value = clustering["split_p_values"][cluster]
            level = clustering["split_levels"][cluster]
            row = (
                f'<td class="num">{number}</td><td class="num">{cluster}</td>'
                f'<td class="num">{ratio:.4f}</td><td class="num">{p_value:.3f}</td>'
                f'<td class="num">{level:.4f}</td><td>{verdict}</td>'
            )
            assert row in page
        published = next(e["detail"] for e in events if e["to_stage"] == "published")
        learned = (
            f'<tr><td class="num">{number}</td>'
            f'<td class="num">{clustering["decoded_distances"]}</td>'
            f'<td class="num">{len(published["aggregated"])}</td>'
        )
        assert learned in page

    # Accuracy: mean and 10th percentile of what the participants reported.
    for number, values in reported.items():
        v = list(values.values())
        row = (
            f'<tr><td class="num">{number}</td><td class="num">{np.mean(v):.4f}</td>'
            f'<td class="num">{np.percentile(v, 10):.4f}</td></tr>'
        )
        assert row in page

    # Counts only: no decoded distance (the API shows them: operators_see_distances).
    decoded = np.asarray(h.status(2)["distances"]["point"]).ravel()
    assert decoded.size > 0
    assert not [d for d in decoded if repr(float(d)) in page or f"{d:.6f}" in page]


def test_timeline_shows_waiting_dropped_and_failure(
    client: TestClient, harness: FederationHarness, clock: FakeClock
) -> None:
    h = harness
    login(client)
    number = h.start_round()
    h.act(skip={5, 6, 7})
    fragment = client.get(f"/dashboard/federations/{h.id}/timeline").text
    assert f"Round {number}" in fragment
    assert "5, waiting for 5, 6, 7" in fragment
    assert 'data-live="true"' in fragment
    clock.advance(61)  # the sharing deadline passes: 5, 6, 7 are dropped
    h.stage(number)  # a read drives the round
    fragment = _flat(client.get(f"/dashboard/federations/{h.id}/timeline").text)
    sharing = fragment.split('<th scope="row">sharing</th>')[1].split("</tr>")[0]
    assert "<td>5, 6, 7</td>" in sharing
    r = client.post(
        f"/v1/federations/{h.id}/rounds/{number}/abort",
        json={"reason": "operator test"},
        headers=ADMIN,
    )
    assert r.status_code == 200
    fragment = client.get(f"/dashboard/federations/{h.id}/timeline").text
    assert "Why: aborted: operator test" in fragment
    assert 'data-live="false"' in fragment
    page = client.get(f"/dashboard/federations/{h.id}").text
    assert (
        _cluster_in(_titles(page), f"6: {h.sims[6].name}", number)
        == "cluster 0, dropped in sharing"
    )


def test_privacy_budget_and_ledger_refusals(
    client: TestClient, make_harness: Any, db_url: str
) -> None:
    z, delta = 2.0, 1e-5
    one, two = (epsilon_for(z, rounds=r, delta=delta) for r in (1, 2))
    cap = (one + two) / 2
    dp = {"mechanism": "gaussian", "noise_multiplier": z, "delta": delta, "epsilon_budget": cap}
    h = make_harness(client, dp=dp)
    h.run_round()
    refused = client.post(f"/v1/federations/{h.id}/rounds", headers=ADMIN)
    assert refused.status_code == 409
    login(client)
    page = _flat(client.get(f"/dashboard/federations/{h.id}").text)
    assert "round 2 at" in page
    assert html.escape(refused.json()["detail"], quote=False) in page
    # The ledger's own account (discrete Gaussian on the integer sum), per participant.
    engine = make_engine(db_url)
    with make_sessionmaker(engine)() as session:
        records = store.ledger_records(session, h.id)
    engine.dispose()
    assert len(records) == 1
    for sim in h.sims:
        spent = epsilon_spent(records, delta=delta, participant=sim.index)
        assert one <= spent < cap
        assert f'<th scope="row">{sim.name}</th><td class="num">{spent:.3f}</td>' in page
        assert f'value="{spent / cap:.4f}"' in page
    listing = client.get("/dashboard/").text
    assert "gaussian DP, z=2" in listing


@pytest.fixture
def make_harness() -> Any:
    return FederationHarness


def test_federations_list_counts(client: TestClient, harness: FederationHarness) -> None:
    h = harness
    h.run_round()
    client.post(
        f"/v1/federations/{h.id}/participants/{h.sims[0].participant_id}/revoke", headers=ADMIN
    )
    login(client)
    row = _flat(client.get("/dashboard/").text).split("test-federation")[1].split("</tr>")[0]
    cells = re.findall(r"<td[^>]*>(.*?)</td>", row)
    assert cells[0] == "idle (round 1 published)"
    assert cells[3] == "not pinned"  # the harness's stand-in trainers: backbone null
    assert cells[4:] == ["7 / 8", "0", "1", "1"]


def test_heatmap_merges_equal_runs_and_escapes_labels() -> None:
    cells = [[Cell(0)] * 5, [Cell(0), Cell(1), Cell(1), Cell(None), Cell(1, "sharing")]]
    svg = str(heatmap(["<b>a</b>", "b"], [1, 2, 3, 4, 5], cells))
    assert svg.count("<rect x=") == 1 + 4
    assert "<b>a</b>" not in svg
    assert "&lt;b&gt;a&lt;/b&gt;, rounds 1-5: cluster 0" in svg
    assert "b, rounds 2-3: cluster 1" in svg
    assert "b, round 4: not in the round" in svg
    assert 'fill="url(#hatch)"' in svg


@pytest.mark.slow  # over 1.5 s on the 2-core machine: out of the inner loop (bash dev.sh quick)
def test_timeline_names_a_contributor_the_offset_check_caught(
    client: TestClient, harness: FederationHarness
) -> None:
    """A participant whose zero-sharings do not vanish at the data point (docs/protocol.md
    section 4, "Offset check"): the round still publishes, without a clustering step, and
    both the API and the timeline name the sender."""
    h = harness
    login(client)
    chosen = []

    def pick(number: int) -> None:  # the round's first zero-sharing contributor cheats
        status = client.get(f"/v1/federations/{h.id}/rounds/{number}", headers=ADMIN).json()
        chosen.append(h.sims[status["zero_contributors"][0]])
        chosen[0].zero_offset = 10**6

    number = h.run_round(on_start=pick)
    (cheater,) = chosen
    status = client.get(f"/v1/federations/{h.id}/rounds/{number}", headers=ADMIN).json()
    assert status["clustering"] is True
    assert status["stage"] == "published", status["failure_reason"]
    assert status["offset_failures"] == [cheater.index]
    assert status["next_clusters"] is None
    fragment = _flat(client.get(f"/dashboard/federations/{h.id}/timeline").text)
    assert "Offset check failed: the zero-sharing contributions of " in fragment
    assert f"contributions of {cheater.index} did not vanish" in fragment
    number = h.run_round()  # it cheats again: left out of the distances, to no effect
    status = client.get(f"/v1/federations/{h.id}/rounds/{number}", headers=ADMIN).json()
    assert status["stage"] == "published", status["failure_reason"]
    assert (status["offset_failures"], status["distance_excluded"]) == ([], [cheater.index])
    assert status["next_clusters"] is not None
    fragment = _flat(client.get(f"/dashboard/federations/{h.id}/timeline").text)
    assert f"named by an earlier offset check): {cheater.index}</p>" in fragment
