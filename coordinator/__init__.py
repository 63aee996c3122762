"""SecFPP coordinator: the FastAPI service that drives rounds (DESIGN.md 1, 4, 5, 6, 7, 9).

It relays sealed shares, decodes only the permitted outputs (SecPC distances, cluster
sums) with the crypto core, runs the clustering step and publishes cluster global
prompts. It holds no key that opens a share and no protocol math of its own.

Layout, by domain: :mod:`.settings` (the process's settings, from the environment),
:mod:`.federations` (creating federations, enrollment; their configuration document is
:mod:`secfpp.federation`),
:mod:`.auth` (bearer tokens of every kind, dashboard sessions, rate limits), :mod:`.rounds`
(pure stage machine, transition computations, CAS driver, uploads, views), :mod:`.api`
(``routes/`` per area, ``schemas/`` of the bodies, ``Annotated`` dependencies, the body guard,
the one error-to-problem mapping), :mod:`.dashboard`, :mod:`.jobs` (the decode queue),
:mod:`.db` (models, engine, Alembic helpers), :mod:`.app` (factory + lifespan), :mod:`.tls`,
:mod:`.cli`.

API (``/v1``; problem documents ``application/problem+json`` with a stable ``code``):

* admin (admin bearer token): ``POST/GET /v1/federations``, ``GET /v1/federations/{id}``,
  ``POST /v1/federations/{id}/enrollment-tokens``, ``POST /v1/federations/{id}/rounds``
  (start next), ``GET /v1/federations/{id}/rounds/{n}`` (status),
  ``POST /v1/federations/{id}/rounds/{n}/abort``, ``GET /v1/federations/{id}/metrics``
  (what participants reported, per round);
* participant: ``POST /v1/enroll`` (enrollment token), then with its API token
  ``GET /v1/participants/me``, ``GET /v1/participants/me/task``,
  ``POST /v1/participants/me/rounds/{n}/shares``,
  ``GET /v1/participants/{me|id}/rounds/{n}/inbox``,
  ``POST /v1/participants/me/rounds/{n}/results/{distances|aggregation}`` (JSON base64 or
  ``application/octet-stream``), ``POST /v1/participants/me/rounds/{n}/refusals``,
  ``GET /v1/participants/me/rounds/{n}/outcome``,
  ``POST /v1/participants/me/rounds/{n}/metrics`` (name -> number, e.g. accuracy);
* ops: ``/healthz``, ``/readyz``, ``/metrics``.

Choices where DESIGN.md leaves room:

* *training* is folded into *sharing* (participants train on the task, then share before
  the sharing deadline); stages are ``sharing -> distances -> clustering -> aggregation
  -> published`` plus ``failed`` / ``aborted`` (:mod:`.rounds.machine`).
* Sharing uploads, in one request, two envelopes per recipient (itself included):
  ``prompt`` (share of ``x_i``, clustering field, sealed with ShareContext stage
  ``sharing-prompt``) and ``update`` (share of ``g_i``, aggregation field,
  ``sharing-update``); warmup and unclustered rounds send ``update`` only. The exact
  envelope size is in the task and checked on upload.
* Thresholds: distances ``2(K_c+T_c-1)+1`` results, aggregation ``K_a+T_a``; sharing the
  larger of the two (of the aggregation one and ``min_aggregation_size`` in rounds
  without distances). A participant who misses a stage (or refuses) is dropped for the
  rest of the round; the later stages compute over everybody whose shares were delivered.
* Warmup counts *published* rounds (a failed round does not use it up); only strategy
  ``secfpp`` clusters, ``promptfl`` / ``dpfpl`` keep one global prompt.
* A round starts only when all ``N`` participants are enrolled; generation 0 of the
  global prompt is ``N(0, init_std^2)`` from the public seed.
"""
