"""Where the test suite's time goes: ``python -m bench.suite`` (see :mod:`bench.suite.run`).

* :mod:`bench.suite.plugin`: a pytest plugin (``-p bench.suite.plugin``) that records, per
  test, its wall time and the CPU seconds of the worker itself and of the subprocesses it
  waited for;
* :mod:`bench.suite.procs`: a sampler of every process on the machine (``/proc``), so that
  what no test waits for (PostgreSQL's backends, daemonized servers, containers) is counted
  too, sorted into categories by command line;
* :mod:`bench.suite.run`: runs ``bash dev.sh test`` (or any command) with both and writes the
  dated report (``docs/results/test-suite.md``).
"""
