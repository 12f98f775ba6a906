"""Errors the local runtime raises for problems the user has to fix."""


class LocalRunError(Exception):
    """Base class: a problem with the local setup, reported with a message that says what to do."""


class TemplateError(LocalRunError):
    """template.yaml uses something the local runtime cannot run, or is inconsistent."""


class EndpointError(LocalRunError):
    """DynamoDB Local or the moto server could not be started or reached."""
