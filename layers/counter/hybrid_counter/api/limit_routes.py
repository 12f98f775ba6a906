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
    NO_CONTENT,
    NOT_FOUND,
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
from hybrid_counter.api.models import AccountPlanBody, KindId, LimitBody, PlanBody
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
        responses=responses(ok(UsageOut, "The account's limits and use, per kind")),
    )
    def get_limits(account_id: AccountId) -> Response[str]:
        return json_response(200, service().usage(account_id).to_json())

    @router.put(
        "/accounts/<account_id>/limit", responses=responses(BELOW_USAGE, ok(LimitOut, "The override set"))
    )
    def put_limit(account_id: AccountId, body: Annotated[LimitBody, Body()]) -> Response[str]:
        changed = service().set_limit(account_id, body.limit, force=body.force, by=by())
        return json_response(200, {"account_id": account_id, "limit": changed["limit"]})

    @router.put(
        "/accounts/<account_id>/limits/<kind>",
        responses=responses(BELOW_USAGE, ok(LimitOut, "The override set")),
    )
    def put_kind_limit(
        account_id: AccountId, kind: Kind, body: Annotated[LimitBody, Body()]
    ) -> Response[str]:
        changed = service().set_limit(account_id, body.limit, kind=kind, force=body.force, by=by())
        return json_response(200, changed)

    @router.delete("/accounts/<account_id>/limits/<kind>", responses=responses(BELOW_USAGE, NO_CONTENT))
    def delete_kind_limit(account_id: AccountId, kind: Kind, force: Force = False) -> Response[str]:
        service().remove_limit(account_id, kind=kind, force=force, by=by())
        return Response(status_code=204, body="")

    @router.get(
        "/accounts/<account_id>/limits/history",
        responses=responses(ok(HistoryPageOut, "Changes, newest first")),
    )
    def get_account_history(
        account_id: AccountId, kind: KindFilter = None, limit: PageSize = 50, next_token: NextToken = None
    ) -> Response[str]:
        page = service().account_history(account_id, kind=kind, page_size=limit, next_token=next_token)
        return json_response(200, {"items": page.items, "next_token": page.next_token})

    @router.put(
        "/accounts/<account_id>/plan",
        responses=responses(BELOW_USAGE, ok(AccountPlanOut, "The account's plan")),
    )
    def put_account_plan(account_id: AccountId, body: Annotated[AccountPlanBody, Body()]) -> Response[str]:
        return json_response(200, service().assign_plan(account_id, body.plan_id, force=body.force, by=by()))

    @router.put("/plans/<plan_id>", responses=responses(ok(PlanOut, "The plan as written")))
    def put_plan(plan_id: PlanId, body: Annotated[PlanBody, Body()]) -> Response[str]:
        return json_response(200, service().put_plan(plan_id, dict(body.limits), by=by()).to_json())

    @router.get("/plans/<plan_id>", responses=responses(NOT_FOUND, ok(PlanOut, "The plan")))
    def get_plan(plan_id: PlanId) -> Response[str]:
        return json_response(200, service().get_plan(plan_id).to_json())

    @router.get("/plans/<plan_id>/history", responses=responses(ok(HistoryPageOut, "Changes, newest first")))
    def get_plan_history(
        plan_id: PlanId, limit: PageSize = 50, next_token: NextToken = None
    ) -> Response[str]:
        page = service().plan_history(plan_id, page_size=limit, next_token=next_token)
        return json_response(200, {"items": page.items, "next_token": page.next_token})

    @router.get("/plans", responses=responses(ok(PlanPageOut, "Plans in id order")))
    def list_plans(limit: PageSize = 50, next_token: NextToken = None) -> Response[str]:
        page = service().list_plans(limit, next_token)
        return json_response(
            200, {"items": [plan.to_json() for plan in page.items], "next_token": page.next_token}
        )

    return router
