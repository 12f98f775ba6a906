"""The operators' routes: plans, an account's plan and overrides, any account's limits, history.

Each has `AuthorizationScopes: [OperatorScope]` in template.yaml: API Gateway grants them
(api/access.py). Changing a plan's limits is one write, whatever the number of accounts on it;
it takes effect for every account within `PlanCacheSeconds` (plans/limits.py). Every change is
refused below current use unless forced, and recorded in history with who made it
(governance/changes.py).
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
    HISTORY_EXAMPLE,
    NO_CONTENT,
    NOT_FOUND,
    OVERRIDES,
    PLAN_EXAMPLE,
    PLAN_HISTORY_EXAMPLE,
    PLANS,
    USAGE,
    USAGE_EXAMPLE,
    AccountPlanOut,
    HistoryPageOut,
    LimitOut,
    PlanOut,
    PlanPageOut,
    UsageOut,
    ok,
    responses,
)
from hybrid_counter.api.json_response import json_response
from hybrid_counter.api.models import (
    ACCOUNT_PLAN_EXAMPLES,
    LIMIT_EXAMPLES,
    PLAN_EXAMPLES,
    AccountPlanBody,
    KindId,
    LimitBody,
    PlanBody,
)
from hybrid_counter.api.resource_routes import AccountId, Kind, NextToken, PageSize
from hybrid_counter.keys import ID_PATTERN
from hybrid_counter.resources import ResourceService

PlanId = Annotated[str, Path(pattern=ID_PATTERN, description="Plan id: 1-64 of A-Z a-z 0-9 _ . -")]
Force = Annotated[bool, Query(description="Apply it even below the kind's current use")]
KindFilter = Annotated[KindId | None, Query(description="Only this kind's changes")]


def limit_routes(service: Callable[[], ResourceService]) -> Router:
    router = Router()  # type: ignore[no-untyped-call]

    def by() -> str:
        """Who is changing a limit: the token's sub, or the IAM principal (for history)."""
        return caller_of(router.current_event.raw_event)

    @router.get(
        "/accounts/<account_id>/limits",
        summary="Get any account's limits and usage",
        description="Operators: what getUsage answers the tenant, for any account.",
        tags=[USAGE],
        operation_id="getAccountLimits",
        responses=responses(ok(UsageOut, "The account's limits and use, per kind", USAGE_EXAMPLE)),
    )
    def get_limits(account_id: AccountId) -> Response[str]:
        return json_response(200, service().usage(account_id).to_json())

    @router.put(
        "/accounts/<account_id>/limit",
        summary="Set the account's limit (default kind)",
        description="Operators: an override of the account's limit for the stack's default kind, over its "
        "plan's. Below current use it is refused (409 LimitBelowUsage) unless forced; recorded in history.",
        tags=[OVERRIDES],
        operation_id="putLimit",
        responses=responses(
            ok(LimitOut, "The override set", {"account_id": "acme", "limit": 12}), BELOW_USAGE
        ),
    )
    def put_limit(
        account_id: AccountId, body: Annotated[LimitBody, Body(openapi_examples=LIMIT_EXAMPLES)]
    ) -> Response[str]:
        changed = service().set_limit(account_id, body.limit, force=body.force, by=by())
        return json_response(200, {"account_id": account_id, "limit": changed["limit"]})

    @router.put(
        "/accounts/<account_id>/limits/<kind>",
        summary="Set the account's limit for a kind",
        description="Operators: an override of the account's limit for the kind, over its plan's. Below "
        "current use it is refused (409 LimitBelowUsage) unless forced; recorded in history.",
        tags=[OVERRIDES],
        operation_id="putKindLimit",
        responses=responses(
            ok(LimitOut, "The override set", {"account_id": "acme", "kind": "seats", "limit": 12}),
            BELOW_USAGE,
        ),
    )
    def put_kind_limit(
        account_id: AccountId, kind: Kind, body: Annotated[LimitBody, Body(openapi_examples=LIMIT_EXAMPLES)]
    ) -> Response[str]:
        changed = service().set_limit(account_id, body.limit, kind=kind, force=body.force, by=by())
        return json_response(200, changed)

    @router.delete(
        "/accounts/<account_id>/limits/<kind>",
        summary="Remove the account's override for a kind",
        description="Operators: the account's limit for the kind is its plan's again (refused below current "
        "use unless ?force=true); recorded in history.",
        tags=[OVERRIDES],
        operation_id="deleteKindLimit",
        responses=responses(NO_CONTENT, BELOW_USAGE),
    )
    def delete_kind_limit(account_id: AccountId, kind: Kind, force: Force = False) -> Response[str]:
        service().remove_limit(account_id, kind=kind, force=force, by=by())
        return Response(status_code=204, body="")

    @router.get(
        "/accounts/<account_id>/limits/history",
        summary="List the account's limit changes",
        description="Operators: its overrides and plan changes, who made them and when, newest first.",
        tags=[HISTORY],
        operation_id="getAccountHistory",
        responses=responses(ok(HistoryPageOut, "Changes, newest first", HISTORY_EXAMPLE)),
    )
    def get_account_history(
        account_id: AccountId, kind: KindFilter = None, limit: PageSize = 50, next_token: NextToken = None
    ) -> Response[str]:
        page = service().account_history(account_id, kind=kind, page_size=limit, next_token=next_token)
        return json_response(200, {"items": page.items, "next_token": page.next_token})

    @router.put(
        "/accounts/<account_id>/plan",
        summary="Move an account to a plan",
        description="Operators: the account's limits become the plan's (its overrides stay). Refused "
        "(409 LimitBelowUsage) if a kind would be below current use, unless forced; recorded in history.",
        tags=[PLANS],
        operation_id="putAccountPlan",
        responses=responses(
            ok(AccountPlanOut, "The account's plan", {"account_id": "acme", "plan_id": "pro"}), BELOW_USAGE
        ),
    )
    def put_account_plan(
        account_id: AccountId, body: Annotated[AccountPlanBody, Body(openapi_examples=ACCOUNT_PLAN_EXAMPLES)]
    ) -> Response[str]:
        return json_response(200, service().assign_plan(account_id, body.plan_id, force=body.force, by=by()))

    @router.put(
        "/plans/<plan_id>",
        summary="Create or replace a plan",
        description="Operators: the plan's limits, per kind, replacing the ones it had. One write, whatever "
        "the number of accounts on it: each sees it within PlanCacheSeconds. Recorded in history.",
        tags=[PLANS],
        operation_id="putPlan",
        responses=responses(ok(PlanOut, "The plan as written", PLAN_EXAMPLE)),
    )
    def put_plan(
        plan_id: PlanId, body: Annotated[PlanBody, Body(openapi_examples=PLAN_EXAMPLES)]
    ) -> Response[str]:
        return json_response(200, service().put_plan(plan_id, dict(body.limits), by=by()).to_json())

    @router.get(
        "/plans/<plan_id>",
        summary="Get a plan",
        description="Operators: the plan's limits, per kind.",
        tags=[PLANS],
        operation_id="getPlan",
        responses=responses(ok(PlanOut, "The plan", PLAN_EXAMPLE), NOT_FOUND),
    )
    def get_plan(plan_id: PlanId) -> Response[str]:
        return json_response(200, service().get_plan(plan_id).to_json())

    @router.get(
        "/plans/<plan_id>/history",
        summary="List a plan's changes",
        description="Operators: the plan's limit changes, who made them and when, newest first.",
        tags=[HISTORY],
        operation_id="getPlanHistory",
        responses=responses(ok(HistoryPageOut, "Changes, newest first", PLAN_HISTORY_EXAMPLE)),
    )
    def get_plan_history(
        plan_id: PlanId, limit: PageSize = 50, next_token: NextToken = None
    ) -> Response[str]:
        page = service().plan_history(plan_id, page_size=limit, next_token=next_token)
        return json_response(200, {"items": page.items, "next_token": page.next_token})

    @router.get(
        "/plans",
        summary="List plans",
        description="Operators: a page of plans, in id order; pass next_token back for the next page.",
        tags=[PLANS],
        operation_id="listPlans",
        responses=responses(
            ok(PlanPageOut, "Plans in id order", {"items": [PLAN_EXAMPLE], "next_token": None})
        ),
    )
    def list_plans(limit: PageSize = 50, next_token: NextToken = None) -> Response[str]:
        page = service().list_plans(limit, next_token)
        return json_response(
            200, {"items": [plan.to_json() for plan in page.items], "next_token": page.next_token}
        )

    return router
