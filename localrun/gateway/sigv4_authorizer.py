"""API Gateway's IAM authorization (AWS_IAM) for HTTP APIs, locally: SigV4 verified with botocore.

A route with the AWS_IAM authorizer needs a request signed with Signature Version 4 for the
service `execute-api` in the API's region. Locally the one known caller is `LOCAL_CALLER`
(documented credentials, usable from curl's `--aws-sigv4` or any AWS SDK); botocore's SigV4
signer recomputes the signature over the request as received (method, path, query, the
headers named in SignedHeaders, the body's SHA-256), so no signing code is written here.

Stricter than AWS documents, on purpose: an `X-Amz-Content-SHA256` header must be the SHA-256 of
the body received. `UNSIGNED-PAYLOAD` (which leaves the body out of the signature) is documented
for Amazon S3 only, not for execute-api, so it is refused. Two Authorization headers are joined
with a comma, as API Gateway joins repeated headers, and so are no SigV4 header.

Rejections are 403 with API Gateway's messages for them (the payload hash's is local wording). A
signed request passes the caller's identity to the integration in `requestContext.authorizer.iam`.
What IAM itself would decide next (whether the caller's policies allow `execute-api:Invoke` on
the route) is not emulated: locally every known caller may call every route.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

SERVICE = "execute-api"
MAX_CLOCK_SKEW = timedelta(minutes=5)
_AUTHORIZATION = re.compile(
    r"^AWS4-HMAC-SHA256\s+Credential=(?P<key>[^/,\s]+)/(?P<date>\d{8})/(?P<region>[^/,\s]+)/"
    r"(?P<service>[^/,\s]+)/aws4_request,\s*SignedHeaders=(?P<headers>[^,\s]+),\s*"
    r"Signature=(?P<signature>[0-9a-f]{64})\s*$"
)
PAYLOAD_HASH_MISMATCH = (
    "X-Amz-Content-SHA256 must be the SHA-256 of the request body (UNSIGNED-PAYLOAD is not accepted)."
)
SIGNATURE_MISMATCH = (
    "The request signature we calculated does not match the signature you provided. Check your AWS "
    "Secret Access Key and signing method. Consult the service documentation for details."
)


@dataclass(frozen=True)
class Caller:
    access_key_id: str
    secret_access_key: str
    account_id: str
    user_name: str

    @property
    def user_arn(self) -> str:
        return f"arn:aws:iam::{self.account_id}:user/{self.user_name}"

    @property
    def user_id(self) -> str:
        return "AIDA" + hashlib.sha256(self.user_arn.encode()).hexdigest()[:17].upper()


LOCAL_CALLER = Caller(
    access_key_id="AKIAHCLOCALCALLER001",
    secret_access_key="local-caller-secret",  # noqa: S106 - local only, documented in the README
    account_id="123456789012",
    user_name="hybrid-counter-local-caller",
)


class SignatureRejected(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class SigV4Verifier:
    def __init__(self, region: str, callers: tuple[Caller, ...] = (LOCAL_CALLER,)) -> None:
        self.region = region
        self._callers = {caller.access_key_id: caller for caller in callers}

    def verify(
        self,
        method: str,
        target: str,
        headers: list[tuple[str, str]],
        body: bytes,
        now: datetime | None = None,
    ) -> dict[str, Any]:
        """The `requestContext.authorizer` value for a correctly signed request; raises SignatureRejected."""
        received: dict[str, str] = {}
        for name, value in headers:
            key = name.lower()
            received[key] = f"{received[key]},{value}" if key in received else value
        authorization = received.get("authorization", "")
        if not authorization:
            raise SignatureRejected("Forbidden")
        match = _AUTHORIZATION.match(authorization)
        if match is None:
            raise SignatureRejected(
                f"Authorization header is not a valid SigV4 header: '{authorization[:40]}'"
            )
        caller = self._callers.get(match["key"])
        if caller is None:
            raise SignatureRejected("The security token included in the request is invalid.")
        if match["service"] != SERVICE:
            raise SignatureRejected(f"Credential should be scoped to correct service: '{SERVICE}'.")
        if match["region"] != self.region:
            raise SignatureRejected(
                f"Credential should be scoped to a valid region, not '{match['region']}'."
            )
        timestamp = received.get("x-amz-date", "")
        try:
            signed_at = datetime.strptime(timestamp, "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
        except ValueError:
            raise SignatureRejected(
                "Authorization header requires existence of either a 'X-Amz-Date' or a 'Date' header."
            ) from None
        current = now or datetime.now(UTC)
        if abs(current - signed_at) > MAX_CLOCK_SKEW or match["date"] != timestamp[:8]:
            raise SignatureRejected(f"Signature expired: {timestamp} is outside the allowed clock skew.")
        signed = match["headers"].split(";")
        if "host" not in signed or any(name not in received for name in signed):
            raise SignatureRejected("'Host' must be a 'SignedHeader' in the AWS Authorization.")
        # botocore signs over this header's value when it is signed, not over the body: any value
        # but the body's own hash (UNSIGNED-PAYLOAD included) would leave the body unsigned.
        declared_hash = received.get("x-amz-content-sha256")
        if declared_hash is not None and declared_hash != hashlib.sha256(body).hexdigest():
            raise SignatureRejected(PAYLOAD_HASH_MISMATCH)
        request = AWSRequest(
            method=method,
            url=f"http://{received['host']}{target}",
            headers={name: received[name] for name in signed},
            data=body,
        )
        request.context["timestamp"] = timestamp
        signer = SigV4Auth(Credentials(caller.access_key_id, caller.secret_access_key), SERVICE, self.region)
        string_to_sign = signer.string_to_sign(request, signer.canonical_request(request))
        if not hmac.compare_digest(signer.signature(string_to_sign, request), match["signature"]):
            raise SignatureRejected(SIGNATURE_MISMATCH)
        return {
            "iam": {
                "accessKey": caller.access_key_id,
                "accountId": caller.account_id,
                "callerId": caller.user_id,
                "cognitoIdentity": None,
                "principalOrgId": None,
                "userArn": caller.user_arn,
                "userId": caller.user_id,
            }
        }
