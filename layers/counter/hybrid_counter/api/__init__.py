"""The HTTP API: routes, validation, and the one place domain errors become status codes."""
