"""Jobs: the round decodes and the deadline driver, off the request path.

Two jobs (:mod:`coordinator.jobs.tasks`): ``drive_round`` (a round's due transitions,
decodes included) and ``check_deadlines`` (one pass over every unfinished round). A
request never decodes: its pass queues ``drive_round`` instead
(:class:`~coordinator.rounds.driver.RoundDriver`), and every coordinator queues
``check_deadlines`` each ``tick_interval_s``.

* PostgreSQL: the queue is procrastinate (:mod:`coordinator.jobs.postgres`) in the
  database's ``procrastinate`` schema; workers run inside coordinators
  (``jobs_in_process``) and as ``secfpp-worker`` processes on any machine that reaches
  the database (:mod:`coordinator.jobs.worker`). Jobs of a killed worker run again
  elsewhere after ``jobs_stalled_s``.
* SQLite (embedded default): the same functions run on threads of the coordinator
  (:mod:`coordinator.jobs.local`).
"""
