"""Organizations' routes: the organization, its overrides, its members, its usage and history.

Every write is an operator's (`AuthorizationScopes: [OperatorScope]` in template.yaml). The three
reads (`GET /orgs/{org_id}`, `.../usage`, `.../limits/history`) are also the organization
administrator's, for its own organization (api/access.py says how each is recognised). A
membership changes only while the account is empty, and an organization is deleted only without
members (orgs/store.py); each refusal is a 409 with its own code (api/errors.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Body, Path, Query

from hybrid_counter.api.access import caller_of
from hybrid_counter.api.documented import (
    BELOW_USAGE,
    LEAVE_CONFLICT,
    MEMBERSHIP_CONFLICT,
    NO_CONTENT,
    NO_SUCH_ORG,
    ORG_NOT_EMPTY,
    HistoryPageOut,
    MemberOut,
    OrgLimitOut,
    OrgOut,
    OrgUsageOut,
    ok,
    responses,
)
from hybrid_counter.api.json_response import json_response
from hybrid_counter.api.limit_routes import Force, KindFilter
from hybrid_counter.api.models import LimitBody, OrgBody
from hybrid_counter.api.resource_routes import AccountId, Kind, NextToken, PageSize
from hybrid_counter.keys import ID_PATTERN
from hybrid_counter.resources import ResourceService

OrgId = Annotated[str, Path(pattern=ID_PATTERN, description="Organization id: 1-64 of A-Z a-z 0-9 _ . -")]
Top = Annotated[int, Query(ge=0, le=100, description="How many of the members that use most, per kind")]


def org_routes(service: Callable[[], ResourceService]) -> Router:
    router = Router()  # type: ignore[no-untyped-call]

    def by() -> str:
        """Who is changing the organization: the token's sub, or the IAM principal (for history)."""
        return caller_of(router.current_event.raw_event)

    @router.put(
        "/orgs/<org_id>",
        responses=responses(
            BELOW_USAGE,
            ok(OrgOut, "The organization, moved to the plan (or already on it)"),
            ok(OrgOut, "Created: the new organization", 201),
        ),
    )
    def put_org(org_id: OrgId, body: Annotated[OrgBody, Body()]) -> Response[str]:
        org, created = service().put_org(org_id, body.plan_id, force=body.force, by=by(), shards=body.shards)
        return json_response(201 if created else 200, org.to_json())

    @router.get("/orgs/<org_id>", responses=responses(NO_SUCH_ORG, ok(OrgOut, "The organization")))
    def get_org(org_id: OrgId) -> Response[str]:
        return json_response(200, service().get_org(org_id).to_json())

    @router.delete("/orgs/<org_id>", responses=responses(ORG_NOT_EMPTY, NO_SUCH_ORG, NO_CONTENT))
    def delete_org(org_id: OrgId) -> Response[str]:
        service().delete_org(org_id)
        return Response(status_code=204, body="")

    @router.put(
        "/orgs/<org_id>/limits/<kind>",
        responses=responses(BELOW_USAGE, NO_SUCH_ORG, ok(OrgLimitOut, "The organization's override set")),
    )
    def put_org_limit(org_id: OrgId, kind: Kind, body: Annotated[LimitBody, Body()]) -> Response[str]:
        service().set_org_limit(org_id, kind, body.limit, force=body.force, by=by())
        return json_response(200, {"org_id": org_id, "kind": kind, "limit": body.limit})

    @router.delete("/orgs/<org_id>/limits/<kind>", responses=responses(BELOW_USAGE, NO_SUCH_ORG, NO_CONTENT))
    def delete_org_limit(org_id: OrgId, kind: Kind, force: Force = False) -> Response[str]:
        service().set_org_limit(org_id, kind, None, force=force, by=by())
        return Response(status_code=204, body="")

    @router.put(
        "/orgs/<org_id>/accounts/<account_id>",
        responses=responses(
            MEMBERSHIP_CONFLICT,
            NO_SUCH_ORG,
            ok(MemberOut, "The account already was a member; nothing changed"),
            ok(MemberOut, "The account joined the organization", 201),
        ),
    )
    def put_member(org_id: OrgId, account_id: AccountId) -> Response[str]:
        joined = service().add_member(org_id, account_id)
        return json_response(201 if joined else 200, {"org_id": org_id, "account_id": account_id})

    @router.delete(
        "/orgs/<org_id>/accounts/<account_id>",
        responses=responses(LEAVE_CONFLICT, NO_CONTENT),
    )
    def delete_member(org_id: OrgId, account_id: AccountId) -> Response[str]:
        service().remove_member(org_id, account_id)
        return Response(status_code=204, body="")

    @router.get(
        "/orgs/<org_id>/usage",
        responses=responses(NO_SUCH_ORG, ok(OrgUsageOut, "The organization's limits and use, per kind")),
    )
    def get_org_usage(org_id: OrgId, top: Top = 5) -> Response[str]:
        return json_response(200, service().org_usage(org_id, top=top).to_json())

    @router.get(
        "/orgs/<org_id>/limits/history",
        responses=responses(ok(HistoryPageOut, "Changes, newest first")),
    )
    def get_org_history(
        org_id: OrgId, kind: KindFilter = None, limit: PageSize = 50, next_token: NextToken = None
    ) -> Response[str]:
        page = service().org_history(org_id, kind=kind, page_size=limit, next_token=next_token)
        return json_response(200, {"items": page.items, "next_token": page.next_token})

    return router
