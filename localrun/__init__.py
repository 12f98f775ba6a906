"""Embedded local runtime: runs the SAM app of template.yaml without Docker or an AWS account.

Real local endpoints (DynamoDB Local for DynamoDB and its streams, moto for SQS) bound
to 127.0.0.1, plus the parts of AWS they lack, played here: an API Gateway
HTTP API front door, Lambda's execution environments (one child process per concurrent
invocation) and its DynamoDB Streams and SQS event source mappings, and EventBridge
schedules. Everything is read from template.yaml.
"""

from localrun.errors import EndpointError, LocalRunError, TemplateError
from localrun.functions.invoke import FunctionError, FunctionInvoker, FunctionTimeoutError
from localrun.functions.lambda_worker import LambdaContext
from localrun.runtime import LocalRuntime, RuntimeOptions
from localrun.stack.endpoints import LocalEndpoints
from localrun.stack.template import Template, load_template

__all__ = [
    "EndpointError",
    "FunctionError",
    "FunctionInvoker",
    "FunctionTimeoutError",
    "LambdaContext",
    "LocalEndpoints",
    "LocalRunError",
    "LocalRuntime",
    "RuntimeOptions",
    "Template",
    "TemplateError",
    "load_template",
]
