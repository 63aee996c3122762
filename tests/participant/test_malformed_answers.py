"""A coordinator answer of the wrong shape stops the daemon with an error naming the field.

The participant parses every answer into the wire schema (secfpp.wire.messages) before its
stage code reads it: a task whose field has the wrong type is an InvalidAnswerError that
names the field (``sharing.recipients.0``), raised before anything is trained, sealed or
uploaded, never a KeyError or TypeError deep in a stage. The real coordinator app serves
the federation; only the answers named here are damaged on their way to the engine.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from secfpp.participant.client import CoordinatorClient, InvalidAnswerError
from tests.participant.test_engine import ADMIN, GroupTrainer, http, make_engines
from tests.support.asgi import TestClient

__all__ = ["http"]

Mutation = Callable[[dict[str, Any]], None]


class Damaging(CoordinatorClient):
    """A client whose JSON answers to ``path_suffix`` pass through ``damage`` (once armed)."""

    def __init__(self, http: TestClient) -> None:
        super().__init__(http)
        self.damage: tuple[str, Mutation] | None = None

    def _request(self, method: str, path: str, *, raw: bool = False, **kwargs: Any) -> Any:
        answer = super()._request(method, path, raw=raw, **kwargs)
        if self.damage is not None and not raw and path.endswith(self.damage[0]):
            self.damage[1](answer)
        return answer


def _set(dotted: str, value: object) -> Mutation:
    def mutate(doc: dict[str, Any]) -> None:
        *parents, last = dotted.split(".")
        node: Any = doc
        for part in parents:
            node = node[int(part)] if part.isdigit() else node[part]
        node[int(last) if last.isdigit() else last] = value

    return mutate


@pytest.mark.parametrize(
    ("field", "value", "named"),
    [
        ("sharing.recipients.0", "everyone", "sharing.recipients.0"),
        ("sharing.envelopes.0.prime", [7], "sharing.envelopes.0.prime"),
        ("round", "three", "round"),
        ("peers.1.index", None, "peers.1.index"),
    ],
)
def test_a_share_task_with_a_field_of_the_wrong_type_names_the_field(
    http: TestClient, tmp_path: Path, field: str, value: object, named: str
) -> None:
    fid, engines = make_engines(http, tmp_path, client_of=Damaging)
    assert http.post(f"/v1/federations/{fid}/rounds", headers=ADMIN).status_code == 201
    engine = engines[0]
    client = engine.client
    assert isinstance(client, Damaging)
    client.damage = ("/me/task", _set(field, value))
    with pytest.raises(InvalidAnswerError) as caught:
        engine.step()
    error = caught.value
    assert error.code == "invalid_answer"
    assert "GET /v1/participants/me/task" in str(error)
    assert "not a valid Task" in error.detail
    assert f"{named}:" in error.detail
    # Nothing happened on the damaged task: no training, no shares, no progress.
    trainer = engine.trainer
    assert isinstance(trainer, GroupTrainer)
    assert trainer.calls == 0
    assert not (engine.state.root / "rounds").exists()
    # The undamaged task is taken up as before.
    client.damage = None
    engine.step()
    assert trainer.calls == 1
    assert engine.progress(1).get("trained")


def test_a_me_answer_of_the_wrong_shape_names_the_field(http: TestClient, tmp_path: Path) -> None:
    _fid, engines = make_engines(http, tmp_path, client_of=Damaging)
    client = engines[0].client
    assert isinstance(client, Damaging)
    assert client.me().index == engines[0].index  # the typed record
    client.damage = ("/participants/me", _set("index", "first"))
    with pytest.raises(InvalidAnswerError) as caught:
        client.me()
    assert "not a valid MeResponse" in caught.value.detail
    assert "index:" in caught.value.detail
