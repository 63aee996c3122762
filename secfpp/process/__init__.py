"""Process helpers that every SecFPP command shares, cryptography or not.

* :mod:`secfpp.process.memory` - keep freed array memory in the process (glibc
  ``mallopt``), called once at start by the daemon, the coordinator's server and workers;
* :mod:`secfpp.process.cli_help` - the ``--help`` formatter of every SecFPP command.

They lived in ``crypto/`` because it was the one package both sides import; they are not
cryptography, so the crypto core stays what its name says. Standard library only: the
participant and the coordinator install them alike.
"""
