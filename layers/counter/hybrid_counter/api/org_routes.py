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
    HISTORY,
    LEAVE_CONFLICT,
    MEMBER_EXAMPLE,
    MEMBERSHIP_CONFLICT,
    NO_CONTENT,
    NO_SUCH_ORG,
    ORG_EXAMPLE,
    ORG_HISTORY_EXAMPLE,
    ORG_NOT_EMPTY,
    ORG_USAGE_EXAMPLE,
    ORGANIZATIONS,
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
from hybrid_counter.api.models import LIMIT_EXAMPLES, ORG_EXAMPLES, DecimalDigits, LimitBody, OrgBody
from hybrid_counter.api.resource_routes import AccountId, Kind, NextToken, PageSize
from hybrid_counter.keys import ID_PATTERN
from hybrid_counter.resources import ResourceService

OrgId = Annotated[str, Path(pattern=ID_PATTERN, description="Organization id: 1-64 of A-Z a-z 0-9 _ . -")]
Top = Annotated[
    int, DecimalDigits, Query(ge=0, le=100, description="How many of the members that use most, per kind")
]


def org_routes(service: Callable[[], ResourceService]) -> Router:
    router = Router()  # type: ignore[no-untyped-call]

    def by() -> str:
        """Who is changing the organization: the token's sub, or the IAM principal (for history)."""
        return caller_of(router.current_event.raw_event)

    @router.put(
        "/orgs/<org_id>",
        summary="Create an organization, or move it to a plan",
        description="Operators: creates the organization on the plan (201), or moves it (200). Refused "
        "(409 LimitBelowUsage) if a kind would be below its current use, unless forced.",
        tags=[ORGANIZATIONS],
        operation_id="putOrg",
        responses=responses(
            ok(OrgOut, "Created: the new organization", {**ORG_EXAMPLE, "members": 0}, 201),
            ok(OrgOut, "The organization, moved to the plan (or already on it)", ORG_EXAMPLE),
            BELOW_USAGE,
        ),
    )
    def put_org(
        org_id: OrgId, body: Annotated[OrgBody, Body(openapi_examples=ORG_EXAMPLES)]
    ) -> Response[str]:
        org, created = service().put_org(org_id, body.plan_id, force=body.force, by=by(), shards=body.shards)
        return json_response(201 if created else 200, org.to_json())

    @router.get(
        "/orgs/<org_id>",
        summary="Get an organization",
        description="Operators, or the organization's administrator: its plan and number of members.",
        tags=[ORGANIZATIONS],
        operation_id="getOrg",
        responses=responses(ok(OrgOut, "The organization", ORG_EXAMPLE), NO_SUCH_ORG),
    )
    def get_org(org_id: OrgId) -> Response[str]:
        return json_response(200, service().get_org(org_id).to_json())

    @router.delete(
        "/orgs/<org_id>",
        summary="Delete an organization",
        description=(
            "Operators: only without members (409 OrganizationNotEmpty otherwise). Without members but "
            "with units still held by requests in flight (a former member's create being undone, a "
            "delete not yet released there): 503, retry shortly."
        ),
        tags=[ORGANIZATIONS],
        operation_id="deleteOrg",
        responses=responses(NO_CONTENT, NO_SUCH_ORG, ORG_NOT_EMPTY),
    )
    def delete_org(org_id: OrgId) -> Response[str]:
        service().delete_org(org_id)
        return Response(status_code=204, body="")

    @router.put(
        "/orgs/<org_id>/limits/<kind>",
        summary="Set the organization's limit for a kind",
        description="Operators: an override of the organization's limit for the kind, over its plan's; "
        "refused below current use unless forced; recorded in history.",
        tags=[ORGANIZATIONS],
        operation_id="putOrgLimit",
        responses=responses(
            ok(
                OrgLimitOut,
                "The organization's override set",
                {"org_id": "acme-group", "kind": "seats", "limit": 100},
            ),
            NO_SUCH_ORG,
            BELOW_USAGE,
        ),
    )
    def put_org_limit(
        org_id: OrgId, kind: Kind, body: Annotated[LimitBody, Body(openapi_examples=LIMIT_EXAMPLES)]
    ) -> Response[str]:
        service().set_org_limit(org_id, kind, body.limit, force=body.force, by=by())
        return json_response(200, {"org_id": org_id, "kind": kind, "limit": body.limit})

    @router.delete(
        "/orgs/<org_id>/limits/<kind>",
        summary="Remove the organization's override for a kind",
        description="Operators: its limit for the kind is its plan's again (refused below current use "
        "unless ?force=true); recorded in history.",
        tags=[ORGANIZATIONS],
        operation_id="deleteOrgLimit",
        responses=responses(NO_CONTENT, NO_SUCH_ORG, BELOW_USAGE),
    )
    def delete_org_limit(org_id: OrgId, kind: Kind, force: Force = False) -> Response[str]:
        service().set_org_limit(org_id, kind, None, force=force, by=by())
        return Response(status_code=204, body="")

    @router.put(
        "/orgs/<org_id>/accounts/<account_id>",
        summary="Add an account to an organization",
        description="Operators: the account joins (201), or already was a member (200). Only while it holds "
        "no resources, and an account belongs to at most one organization (409 otherwise).",
        tags=[ORGANIZATIONS],
        operation_id="putOrgMember",
        responses=responses(
            ok(MemberOut, "The account joined the organization", MEMBER_EXAMPLE, 201),
            ok(MemberOut, "The account already was a member; nothing changed", MEMBER_EXAMPLE),
            NO_SUCH_ORG,
            MEMBERSHIP_CONFLICT,
        ),
    )
    def put_member(org_id: OrgId, account_id: AccountId) -> Response[str]:
        joined = service().add_member(org_id, account_id)
        return json_response(201 if joined else 200, {"org_id": org_id, "account_id": account_id})

    @router.delete(
        "/orgs/<org_id>/accounts/<account_id>",
        summary="Remove an account from an organization",
        description="Operators: only while the account holds no resources (409 AccountNotEmpty otherwise).",
        tags=[ORGANIZATIONS],
        operation_id="deleteOrgMember",
        responses=responses(NO_CONTENT, LEAVE_CONFLICT),
    )
    def delete_member(org_id: OrgId, account_id: AccountId) -> Response[str]:
        service().remove_member(org_id, account_id)
        return Response(status_code=204, body="")

    @router.get(
        "/orgs/<org_id>/usage",
        summary="Get the organization's limits and usage",
        description="Operators, or the organization's administrator: per kind, its limit, its use, and the "
        "members that use most (?top).",
        tags=[ORGANIZATIONS],
        operation_id="getOrgUsage",
        responses=responses(
            ok(OrgUsageOut, "The organization's limits and use, per kind", ORG_USAGE_EXAMPLE), NO_SUCH_ORG
        ),
    )
    def get_org_usage(org_id: OrgId, top: Top = 5) -> Response[str]:
        return json_response(200, service().org_usage(org_id, top=top).to_json())

    @router.get(
        "/orgs/<org_id>/limits/history",
        summary="List the organization's limit changes",
        description="Operators, or the organization's administrator: its overrides and plan changes, who "
        "made them and when, newest first.",
        tags=[HISTORY],
        operation_id="getOrgHistory",
        responses=responses(ok(HistoryPageOut, "Changes, newest first", ORG_HISTORY_EXAMPLE)),
    )
    def get_org_history(
        org_id: OrgId, kind: KindFilter = None, limit: PageSize = 50, next_token: NextToken = None
    ) -> Response[str]:
        page = service().org_history(org_id, kind=kind, page_size=limit, next_token=next_token)
        return json_response(200, {"items": page.items, "next_token": page.next_token})

    return router
