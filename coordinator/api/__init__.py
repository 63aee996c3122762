"""HTTP API: the routes per area (``routes/``), their request and response bodies
(``schemas/``), and what every route shares (authentication dependencies, the body guard,
binary bodies, problem documents, limits, parameters, OpenAPI, offline docs)."""
