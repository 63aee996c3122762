"""What the tests share: constants, fakes, builders and process harnesses.

Conftests hold only fixtures (and pytest hooks); everything a fixture or a test module
needs beyond that lives here, once, and is imported from here:

* :mod:`tests.support.common`: the admin token, :class:`FakeClock`, free ports, base64,
  skip-or-fail for missing tools and data.
* :mod:`tests.support.databases`: this session's PostgreSQL databases.
* :mod:`tests.support.federations`: the one federation-body builder and its presets.
* :mod:`tests.support.coordinator`: coordinator settings, problem-document asserts and the
  simulated participants of the coordinator tests.
* :mod:`tests.support.trainers`: the stand-in trainer of the participant engine (also the
  workload of ``bench/load/sim.py``).
* :mod:`tests.support.processes`: a real coordinator process.
* :mod:`tests.support.faults`, :mod:`tests.support.replicas`, :mod:`tests.support.committee`,
  :mod:`tests.support.dashboard`, :mod:`tests.support.docker`: the kits of those suites.
* :mod:`tests.support.learning`: the tiny open_clip config and toy images.
* :mod:`tests.support.threads`: run a callable per item in threads (race tests).
* :mod:`tests.support.extras`: what an install extra pulls in, from package metadata.
"""
