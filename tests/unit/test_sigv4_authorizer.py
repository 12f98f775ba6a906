"""The local IAM authorizer accepts what botocore signs for execute-api and nothing else."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from localrun.sigv4_authorizer import LOCAL_CALLER, SignatureRejected, SigV4Verifier

HOST = "127.0.0.1:3000"
TARGET = "/accounts/acme/resources?limit=5"
BODY = b'{"name": "web"}'


def signed(
    secret: str = LOCAL_CALLER.secret_access_key,
    service: str = "execute-api",
    region: str = "us-east-1",
    body: bytes = BODY,
) -> list[tuple[str, str]]:
    request = AWSRequest(
        method="POST", url=f"http://{HOST}{TARGET}", data=body, headers={"Content-Type": "application/json"}
    )
    SigV4Auth(Credentials(LOCAL_CALLER.access_key_id, secret), service, region).add_auth(request)
    return [("Host", HOST), *request.headers.items()]


def verify(headers: list[tuple[str, str]], body: bytes = BODY, now: datetime | None = None) -> dict:
    return SigV4Verifier("us-east-1").verify("POST", TARGET, headers, body, now=now)


def test_a_request_signed_with_the_local_callers_credentials_passes_its_identity_on():
    context = verify(signed())
    assert context["iam"]["accessKey"] == LOCAL_CALLER.access_key_id
    assert context["iam"]["userArn"] == LOCAL_CALLER.user_arn
    assert set(context["iam"]) == {
        "accessKey",
        "accountId",
        "callerId",
        "cognitoIdentity",
        "principalOrgId",
        "userArn",
        "userId",
    }


@pytest.mark.parametrize(
    ("headers", "body", "message"),
    [  # signed when the test runs, not when it is collected (signatures expire)
        (lambda: [("Host", HOST)], BODY, "Forbidden"),
        (lambda: signed(secret="wrong"), BODY, "does not match"),
        (signed, b'{"name": "tampered"}', "does not match"),
        (lambda: signed(service="s3"), BODY, "execute-api"),
        (lambda: signed(region="eu-west-1"), BODY, "region"),
        (
            lambda: [(n, v.replace(LOCAL_CALLER.access_key_id, "AKIAUNKNOWN")) for n, v in signed()],
            BODY,
            "invalid",
        ),
    ],
)
def test_anything_else_is_refused(headers, body, message):
    with pytest.raises(SignatureRejected, match=message):
        verify(headers(), body)


def test_an_old_signature_is_refused():
    with pytest.raises(SignatureRejected, match="expired"):
        verify(signed(), now=datetime.now(UTC) + timedelta(minutes=6))
