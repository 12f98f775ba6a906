"""The local IAM authorizer accepts what botocore signs for execute-api and nothing else."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta

import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from localrun.gateway.sigv4_authorizer import LOCAL_CALLER, SignatureRejected, SigV4Verifier

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


def signed_declaring(payload_hash: str, body: bytes = BODY) -> list[tuple[str, str]]:
    """Headers signed over `payload_hash` (botocore signs the header's value, not the body)."""
    request = AWSRequest(
        method="POST",
        url=f"http://{HOST}{TARGET}",
        data=body,
        headers={"Content-Type": "application/json", "X-Amz-Content-SHA256": payload_hash},
    )
    credentials = Credentials(LOCAL_CALLER.access_key_id, LOCAL_CALLER.secret_access_key)
    SigV4Auth(credentials, "execute-api", "us-east-1").add_auth(request)
    return [("Host", HOST), *request.headers.items()]


@pytest.mark.parametrize(
    "declared",
    [
        "UNSIGNED-PAYLOAD",  # documented for S3 only, not for execute-api
        "unsigned-payload",
        hashlib.sha256(b'{"name": "signed"}').hexdigest(),  # another body's hash
        hashlib.sha256(b'{"name": "tampered"}').hexdigest().upper(),
    ],
)
def test_a_declared_payload_hash_that_is_not_the_received_bodys_is_refused(declared):
    # Given a correctly signed request whose X-Amz-Content-SHA256 is not the body's SHA-256
    headers = signed_declaring(declared)

    # When it arrives with a body the signature therefore does not cover
    # Then it is refused
    with pytest.raises(SignatureRejected, match="SHA-256 of the request body"):
        verify(headers, b'{"name": "tampered"}')


def test_a_declared_payload_hash_of_the_body_itself_passes():
    context = verify(signed_declaring(hashlib.sha256(BODY).hexdigest()))
    assert context["iam"]["accessKey"] == LOCAL_CALLER.access_key_id


def test_two_authorization_headers_are_refused_even_when_both_are_valid():
    # Given a correctly signed request, and its Authorization header sent twice
    headers = signed()
    (authorization,) = [value for name, value in headers if name == "Authorization"]

    # When both arrive (joined with a comma, as API Gateway joins repeated headers)
    # Then the request is refused
    with pytest.raises(SignatureRejected, match="not a valid SigV4 header"):
        verify([*headers, ("Authorization", authorization)])
