"""AuthMode=iam: the local gateway enforces SigV4 as the template configures it; the account comes from the path."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
import requests
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from localrun import LocalRuntime, RuntimeOptions
from localrun.gateway.sigv4_authorizer import LOCAL_CALLER

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]


@pytest.fixture(scope="module")
def runtime(stack: LocalRuntime) -> Iterator[LocalRuntime]:
    options = RuntimeOptions(
        port=0,
        endpoints=stack.endpoints,  # the session's DynamoDB Local and moto
        stack_name="hybrid-counter-iam",
        parameter_overrides={"AuthMode": "iam"},
        start_stream_pollers=False,
        start_queue_pollers=False,
        start_schedules=False,
    )
    with LocalRuntime(options) as running:
        yield running


def send(runtime: LocalRuntime, method: str, path: str, body: object = None, secret: str | None = None):
    url = runtime.api_url + path
    data = b"" if body is None else json.dumps(body).encode()
    request = AWSRequest(method=method, url=url, data=data, headers={"Content-Type": "application/json"})
    if secret is not None:
        credentials = Credentials(LOCAL_CALLER.access_key_id, secret)
        SigV4Auth(credentials, "execute-api", "us-east-1").add_auth(request)
    return requests.request(method, url, data=data, headers=dict(request.headers.items()), timeout=30)


def test_unsigned_and_wrongly_signed_requests_get_403_and_reach_no_function(runtime):
    called: list[str] = []
    unwrap = runtime.wrap_function("ApiFunction", lambda event, context, call_next: called.append("x"))
    try:
        unsigned = send(runtime, "GET", "/accounts/acme/usage")
        wrong = send(runtime, "POST", "/accounts/acme/resources", {"name": "x"}, secret="not-the-secret")
    finally:
        unwrap()
    assert (unsigned.status_code, unsigned.json()) == (403, {"message": "Forbidden"})
    assert wrong.status_code == 403
    assert "signature" in wrong.json()["message"]
    assert called == []


def test_a_signed_caller_acts_for_any_account_named_in_the_path(runtime):
    seen: list[dict] = []

    def capture(event, context, call_next):
        seen.append(event["requestContext"]["authorizer"])
        return call_next(event, context)

    unwrap = runtime.wrap_function("ApiFunction", capture)
    try:
        secret = LOCAL_CALLER.secret_access_key
        assert send(runtime, "PUT", "/accounts/tenant-a/limit", {"limit": 2}, secret).status_code == 200
        created = send(runtime, "POST", "/accounts/tenant-b/resources", {"name": "web"}, secret)
        usage = send(runtime, "GET", "/accounts/tenant-a/usage", secret=secret)
    finally:
        unwrap()
    assert created.status_code == 201
    assert created.json()["account_id"] == "tenant-b"
    assert usage.json()["limit"] == 2
    assert seen[0]["iam"]["userArn"] == LOCAL_CALLER.user_arn
    assert "jwt" not in seen[0]


def test_the_description_stays_public_and_documents_sigv4(runtime):
    response = send(runtime, "GET", "/openapi.json")
    assert response.status_code == 200
    (scheme,) = response.json()["components"]["securitySchemes"].values()
    assert scheme["x-amazon-apigateway-authtype"] == "awsSigv4"
