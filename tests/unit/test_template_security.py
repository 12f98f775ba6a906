"""template.yaml's security settings, and the local model of them checked against the real SAM transform.

The SAM transform (SAM CLI's own interpreter in .tools, which `make test` installs) says which
managed policies and generated statements each role gets and how each route is authorized; the
least-privilege check and the local gateway must agree with it, in both AuthModes.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from localrun.http_auth import GatewayAuth
from localrun.iam_policies import function_policies, is_allowed, wildcards
from localrun.intrinsics import ResourceValues
from localrun.template import HttpApiEvent, Template, load_template

PROJECT = Path(__file__).resolve().parents[2]
SAM_PYTHON = PROJECT / ".tools" / "bin" / "python"


def local_template(**overrides: str) -> tuple[Template, Any]:
    template = load_template(parameter_overrides=overrides)
    fake = {
        "ResourcesTable": ResourceValues(
            "t", {"Arn": "arn:aws:dynamodb:r:1:table/t", "StreamArn": "arn:aws:dynamodb:r:1:table/t/stream/s"}
        ),
        "RetryQueue": ResourceValues("u", {"Arn": "arn:aws:sqs:r:1:retry", "QueueName": "retry"}),
        "OperatorQueue": ResourceValues("v", {"Arn": "arn:aws:sqs:r:1:operator", "QueueName": "operator"}),
    }
    return template, template.resolver.with_resources(fake)


@pytest.fixture(scope="module", params=["jwt", "iam"])
def transformed(request: pytest.FixtureRequest) -> tuple[str, dict[str, Any]]:
    if not SAM_PYTHON.exists():
        pytest.skip("SAM CLI is not installed in .tools (make test installs it)")
    done = subprocess.run(
        [
            str(SAM_PYTHON),
            str(PROJECT / "tests/tools/sam_transform.py"),
            str(PROJECT / "template.yaml"),
            f"AuthMode={request.param}",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return request.param, json.loads(done.stdout)


def test_the_projects_own_statements_use_no_wildcards():
    template, resolver = local_template()
    for logical_id in template.functions:
        assert wildcards(function_policies(template, resolver, logical_id)) == [], logical_id


def test_what_sam_adds_to_each_role_is_what_the_least_privilege_check_assumes(transformed):
    _, output = transformed
    template, resolver = local_template()
    for logical_id in template.functions:
        role = output["Resources"][f"{logical_id}Role"]["Properties"]
        managed = sorted(arn.rsplit("/", 1)[-1] for arn in role["ManagedPolicyArns"])
        assumed = sorted(
            statement.source.split(":", 1)[1].split(" ", 1)[0]
            for statement in function_policies(template, resolver, logical_id)
            if statement.source.startswith("managed:")
        )
        assert managed == assumed, logical_id
        generated = [
            policy for policy in role.get("Policies", []) if "RolePolicy" not in policy["PolicyName"]
        ]
        sam_statements = [
            s for s in function_policies(template, resolver, logical_id) if s.source.startswith("sam:")
        ]
        for policy in generated:  # e.g. the on-failure destination's sqs:SendMessage
            (statement,) = policy["PolicyDocument"]["Statement"]
            assert any(statement["Action"] in s.actions for s in sam_statements), (logical_id, policy)


def test_the_local_gateway_authorizes_each_route_as_the_transformed_api_does(transformed):
    mode, output = transformed
    body = output["Resources"]["HttpApi"]["Properties"]["Body"]
    expected = {
        f"{method.upper()} {path}": operation.get("security", [])
        for path, item in body["paths"].items()
        for method, operation in item.items()
    }
    template = load_template(parameter_overrides={"AuthMode": mode})
    events = [e for f in template.functions.values() for e in f.events_of(HttpApiEvent)]
    auth = GatewayAuth.from_template(template.http_apis["HttpApi"].auth, events, lambda _: "http://issuer")
    for route_key, security in expected.items():
        ((name, scopes),) = security[0].items()
        local = auth.routes[route_key]
        assert (local.kind, list(local.scopes)) == (
            {"NONE": "NONE", "AWS_IAM": "AWS_IAM"}.get(name, "JWT"),
            scopes,
        ), route_key
    if mode == "jwt":
        scheme = body["components"]["securitySchemes"]["TokenAuthorizer"]["x-amazon-apigateway-authorizer"]
        (authorizer,) = auth.jwt_authorizers
        assert list(authorizer.audiences) == scheme["jwtConfiguration"]["audience"]
        assert scheme["identitySource"] == "$request.header.Authorization"


def test_the_table_is_retained_and_protected_unless_a_test_stack_says_otherwise(transformed):
    _, output = transformed
    table = output["Resources"]["ResourcesTable"]
    assert (table["DeletionPolicy"], table["UpdateReplacePolicy"]) == ("Retain", "Retain")
    assert table["Properties"]["DeletionProtectionEnabled"] is True
    assert "JwtModeNeedsAnIssuer" in output["Rules"]


def test_queues_keep_messages_14_days():
    template, _ = local_template()
    for queue in template.queues.values():
        assert queue.attributes["MessageRetentionPeriod"] == str(14 * 24 * 3600), queue.logical_id


def test_the_policy_model_matches_actions_and_resources_as_iam_does():
    template, resolver = local_template()
    statements = function_policies(template, resolver, "ApiFunction")
    assert is_allowed(statements, "dynamodb:getitem", "arn:aws:dynamodb:r:1:table/t") is not None
    assert is_allowed(statements, "dynamodb:Scan", "arn:aws:dynamodb:r:1:table/t") is None
    assert is_allowed(statements, "dynamodb:GetItem", "arn:aws:dynamodb:r:1:table/other") is None
    assert is_allowed(statements, "logs:PutLogEvents", "arn:aws:logs:r:1:log-group:x") is not None
    stream = function_policies(template, resolver, "StreamCounterFunction")
    assert is_allowed(stream, "dynamodb:GetRecords", "arn:aws:dynamodb:r:1:table/t/stream/s") is not None
    assert is_allowed(stream, "sqs:SendMessage", "arn:aws:sqs:r:1:retry") is not None
    assert is_allowed(stream, "sqs:SendMessage", "arn:aws:sqs:r:1:operator") is None
