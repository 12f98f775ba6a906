"""The HTTP API's authorization as the template configures it, enforced by the local gateway.

`GatewayAuth.from_template()` reads the SAM `Auth` of the `AWS::Serverless::HttpApi`
(`Authorizers` with `JwtConfiguration`, `DefaultAuthorizer`, `EnableIamAuthorizer`) and of each
route's event (`Auth.Authorizer`, `Auth.AuthorizationScopes`), as SAM does: a route uses its own
authorizer if it names one (`NONE`: open), else the API's default; its scopes are its own, else
the authorizer's. Lambda authorizers are not emulated (rejected when the runtime starts).

A JWT authorizer whose issuer is empty is served by the runtime's local OIDC issuer
(`localrun.gateway.oidc_issuer`): the template's way of saying "no identity provider configured yet",
which a deployment refuses (the template's Rules) and `make dev` fills in.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from localrun.errors import TemplateError
from localrun.gateway.jwt_authorizer import JwtAuthorizer, JwtVerifier, TokenRejected
from localrun.gateway.payload import HttpRequest, HttpResponse, joined_header
from localrun.gateway.sigv4_authorizer import SignatureRejected, SigV4Verifier
from localrun.stack.template import REGION, HttpApiEvent

UNAUTHORIZED_BODY = b'{"message":"Unauthorized"}'
FORBIDDEN_BODY = b'{"message":"Forbidden"}'
IAM = "AWS_IAM"
NONE = "NONE"


@dataclass(frozen=True)
class RouteAuth:
    kind: str  # NONE | JWT | AWS_IAM
    authorizer: JwtAuthorizer | None = None
    scopes: tuple[str, ...] = ()


@dataclass
class Decision:
    """Either the `requestContext.authorizer` value (None for open routes) or API Gateway's refusal."""

    context: dict[str, Any] | None = None
    refusal: HttpResponse | None = None


@dataclass
class GatewayAuth:
    routes: dict[str, RouteAuth]  # by route key ("PUT /accounts/{account_id}/limit")
    region: str = REGION
    _verifiers: dict[str, JwtVerifier] = field(default_factory=dict, repr=False)
    _sigv4: SigV4Verifier | None = field(default=None, repr=False)

    @classmethod
    def from_template(
        cls,
        api_auth: Mapping[str, Any] | None,
        events: Iterable[HttpApiEvent],
        local_issuer: Callable[[tuple[str, ...]], str],
        where: str = "HttpApi.Auth",
    ) -> GatewayAuth:
        """`local_issuer(audiences)` starts the local OIDC issuer and returns its URL."""
        authorizers = _authorizers(api_auth or {}, local_issuer, where)
        default = (api_auth or {}).get("DefaultAuthorizer")
        if default is not None and default not in authorizers:
            raise TemplateError(
                f"{where}.DefaultAuthorizer {default!r} is not defined (or IAM is not enabled)"
            )
        routes = {}
        for event in events:
            auth = event.auth or {}
            unknown = set(auth) - {"Authorizer", "AuthorizationScopes"}
            if unknown:
                raise TemplateError(
                    f"route {event.route_key}: Auth {sorted(unknown)} is not emulated locally"
                )
            name = auth.get("Authorizer", default)
            if name is None or name == NONE:
                routes[event.route_key] = RouteAuth(NONE)
                continue
            if name not in authorizers:
                raise TemplateError(f"route {event.route_key}: authorizer {name!r} is not defined")
            authorizer = authorizers[name]
            if authorizer is None:
                if "AuthorizationScopes" in auth:
                    raise TemplateError(f"route {event.route_key}: AuthorizationScopes need a JWT authorizer")
                routes[event.route_key] = RouteAuth(IAM)
                continue
            scopes = auth.get("AuthorizationScopes", authorizer_scopes(api_auth or {}, name))
            routes[event.route_key] = RouteAuth("JWT", authorizer, tuple(str(scope) for scope in scopes))
        return cls(routes)

    @property
    def mode(self) -> str:
        """`jwt`, `iam` or `none`: what the protected routes use (for banners and tokens)."""
        kinds = {route.kind for route in self.routes.values()} - {NONE}
        return "jwt" if "JWT" in kinds else "iam" if IAM in kinds else "none"

    @property
    def jwt_authorizers(self) -> list[JwtAuthorizer]:
        found = {route.authorizer for route in self.routes.values() if route.authorizer is not None}
        return sorted(found, key=lambda authorizer: authorizer.name)

    def authorize(self, route_key: str, request: HttpRequest, request_id: str) -> Decision:
        route = self.routes.get(route_key, RouteAuth(NONE))
        if route.kind == NONE:
            return Decision()
        if route.kind == IAM:
            if self._sigv4 is None:
                self._sigv4 = SigV4Verifier(self.region)
            try:
                return Decision(
                    self._sigv4.verify(request.method, request.target, request.headers, request.body)
                )
            except SignatureRejected as rejected:
                body = b'{"message":"' + rejected.message.replace('"', "'").encode() + b'"}'
                return Decision(refusal=_answer(403, body, request_id))
        assert route.authorizer is not None
        verifier = self._verifiers.setdefault(route.authorizer.name, JwtVerifier(route.authorizer))
        # Two Authorization headers reach the authorizer as one value, joined with a comma, as API
        # Gateway joins repeated headers: no longer a token, so refused, never "the first one".
        header = joined_header(request.headers, "authorization")
        try:
            return Decision(verifier.verify(header, route.scopes))
        except TokenRejected as rejected:
            if rejected.status == 403:
                return Decision(refusal=_answer(403, FORBIDDEN_BODY, request_id))
            challenge = (
                f'Bearer scope="" error="invalid_token" error_description="{rejected.description}"'
                if rejected.description
                else "Bearer"
            )
            return Decision(
                refusal=_answer(401, UNAUTHORIZED_BODY, request_id, ("www-authenticate", challenge))
            )


def _authorizers(
    api_auth: Mapping[str, Any], local_issuer: Callable[[tuple[str, ...]], str], where: str
) -> dict[str, JwtAuthorizer | None]:
    """Authorizer name -> its JWT settings (None for AWS_IAM)."""
    unknown = set(api_auth) - {"Authorizers", "DefaultAuthorizer", "EnableIamAuthorizer"}
    if unknown:
        raise TemplateError(f"{where}: {sorted(unknown)} are not emulated locally")
    found: dict[str, JwtAuthorizer | None] = {}
    if str(api_auth.get("EnableIamAuthorizer", False)).lower() == "true":
        found[IAM] = None
    for name, spec in (api_auth.get("Authorizers") or {}).items():
        config = spec.get("JwtConfiguration") if isinstance(spec, Mapping) else None
        if config is None:
            raise TemplateError(
                f"{where}.Authorizers.{name}: only JWT (OAuth2) authorizers are emulated locally"
            )
        source = spec.get("IdentitySource", "$request.header.Authorization")
        if source != "$request.header.Authorization":
            raise TemplateError(
                f"{where}.Authorizers.{name}: only IdentitySource $request.header.Authorization"
            )
        lowered = {str(key).lower(): value for key, value in config.items()}
        audiences = tuple(str(item) for item in lowered.get("audience") or ())
        if not audiences:
            raise TemplateError(f"{where}.Authorizers.{name}.JwtConfiguration needs an audience")
        issuer = str(lowered.get("issuer") or "")
        found[name] = JwtAuthorizer(name, issuer or local_issuer(audiences), audiences)
    return found


def authorizer_scopes(api_auth: Mapping[str, Any], name: str) -> list[str]:
    spec = (api_auth.get("Authorizers") or {}).get(name) or {}
    return list(spec.get("AuthorizationScopes") or [])


def _answer(status: int, body: bytes, request_id: str, *extra: tuple[str, str]) -> HttpResponse:
    headers = [("apigw-requestid", request_id), ("content-type", "application/json"), *extra]
    return HttpResponse(status, headers, body)
