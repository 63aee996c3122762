"""Request and response bodies of the HTTP API (pydantic), with OpenAPI examples."""
