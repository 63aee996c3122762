"""The wire schema: every message participants and the coordinator exchange, typed once.

* :mod:`secfpp.wire.messages` - the JSON bodies (tasks, uploads, receipts, inboxes,
  outcomes, enrollment, problems), pydantic models both sides validate;
* :mod:`secfpp.wire.types` - their field types (base64 bytes and keys, plain text);
* :mod:`secfpp.wire.backbone` - the pinned backbone a task names;
* :mod:`secfpp.wire.headers` - header names and media types;
* :mod:`secfpp.wire.limits` - every bound the API puts on what a caller may send.

The coordinator's routes and its round core build these models (the HTTP layer re-exports
them beside its admin-only schemas, :mod:`secfpp.coordinator.api.schemas`); the participant
daemon parses the coordinator's answers into them (:mod:`secfpp.participant.client`). The
package imports only pydantic and the standard library, so both installs carry it.
"""
