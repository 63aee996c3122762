"""SecFPP: secure federated prompt personalization for CLIP.

Everything SecFPP installs lives under this one import name, so that the generic names of its
parts cannot collide with other installed packages (PyPI has a ``crypto``, for one):

* :mod:`secfpp.crypto` - the pure crypto core (finite field, Lagrange coded computing, secure
  distances and aggregation, sealed shares, DP mechanisms and accounting);
* :mod:`secfpp.coordinator` - the FastAPI coordinator service;
* :mod:`secfpp.participant` - the participant daemon (torch + open_clip prompt training);
* :mod:`secfpp.migrations` - the Alembic migrations of the coordinator's database;
* :mod:`secfpp.wire` - the typed messages both sides exchange (pydantic only);
* :mod:`secfpp.federation` - a federation's configuration document, which the coordinator
  stores and every daemon parses;
* :mod:`secfpp.process` - process helpers every command shares (memory retention, ``--help``).

In a source checkout the four parts stay top-level folders (``crypto/``, ``coordinator/``,
``participant/``, ``migrations/``) and ``secfpp/`` holds relative links to them, so the checkout
and an installed wheel import the same names. ``bench/``, ``demo/`` and ``tests/`` run from the
checkout and are never installed.
"""

__version__ = "0.1.0"
