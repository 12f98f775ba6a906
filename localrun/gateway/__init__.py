"""API Gateway's HTTP API front door as the template configures it: routes, payload format 2.0,
throttling and the integration timeout, the JWT and SigV4 authorizers, the local OIDC issuer and
the token command, and what is kept out of log lines.
"""
