"""Federations: creating and reading them, enrollment (:mod:`.service`). Their configuration
document, which the daemons read too, is :mod:`secfpp.federation`."""
