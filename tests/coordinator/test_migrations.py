"""The Alembic migrations create exactly the models' schema, on every backend."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect, text

from secfpp.coordinator.db.engine import make_engine
from secfpp.coordinator.db.migrate import current_revision, downgrade, head_revision, upgrade
from secfpp.coordinator.db.models import Base

TABLES = {
    "federations",
    "participants",
    "enrollment_tokens",
    "rounds",
    "round_events",
    "share_envelopes",
    "coded_results",
    "cluster_prompts",
    "privacy_ledger",
    "participant_metrics",
}


def _drift(engine) -> list[object]:  # type: ignore[no-untyped-def]
    with engine.connect() as conn:
        return list(compare_metadata(MigrationContext.configure(conn), Base.metadata))


def test_upgrade_to_head_matches_models(empty_db_url: str) -> None:
    engine = make_engine(empty_db_url)
    try:
        upgrade(engine)
        with engine.connect() as conn:
            assert current_revision(conn) == head_revision()
        assert set(inspect(engine).get_table_names()) >= TABLES
        assert _drift(engine) == []
    finally:
        engine.dispose()


def test_downgrade_then_upgrade_round_trips(empty_db_url: str) -> None:
    engine = make_engine(empty_db_url)
    try:
        upgrade(engine)
        downgrade(engine, "base")
        assert not TABLES & set(inspect(engine).get_table_names())
        with engine.connect() as conn:
            assert current_revision(conn) is None
        upgrade(engine)
        assert _drift(engine) == []
    finally:
        engine.dispose()


def test_0002_adds_participant_metrics_and_keeps_existing_rows(empty_db_url: str) -> None:
    engine = make_engine(empty_db_url)
    try:
        upgrade(engine, "0001")
        assert "participant_metrics" not in inspect(engine).get_table_names()
        with engine.begin() as conn:
            conn.execute(
                text(
                    "INSERT INTO federations (id, name, config, created_at) "
                    "VALUES ('f1', 'kept', '{}', CURRENT_TIMESTAMP)"
                )
            )
        upgrade(engine, "0002")
        assert "participant_metrics" in inspect(engine).get_table_names()
        downgrade(engine, "0001")
        assert "participant_metrics" not in inspect(engine).get_table_names()
        with engine.connect() as conn:
            assert current_revision(conn) == "0001"
            assert conn.execute(text("SELECT name FROM federations")).scalars().all() == ["kept"]
        upgrade(engine)
        assert _drift(engine) == []
    finally:
        engine.dispose()
