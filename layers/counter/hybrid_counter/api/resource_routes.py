"""The tenant's routes: its resources, of any kind, and its usage.

Routes without a kind (``/accounts/{id}/resources...``) act on the stack's default kind
(``DefaultKind``), so callers from before kinds keep working unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Body, Path, Query

from hybrid_counter.api.documented import (
    AT_LIMIT,
    CREATED,
    DRY_RUN,
    HOLD_EXPIRED,
    NO_CONTENT,
    NOT_FOUND,
    PUT_CONFLICT,
    RESOURCE_OR_DRY_RUN,
    ResourceOut,
    ResourcePageOut,
    UsageOut,
    ok,
    responses,
)
from hybrid_counter.api.json_response import json_response
from hybrid_counter.api.models import KIND_DESCRIPTION, KindId, ResizeBody, ResourceBody
from hybrid_counter.keys import ID_PATTERN
from hybrid_counter.resources import ResourceService

AccountId = Annotated[str, Path(pattern=ID_PATTERN, description="Account id: 1-64 of A-Z a-z 0-9 _ . -")]
ResourceId = Annotated[str, Path(pattern=ID_PATTERN, description="Resource id: 1-64 of A-Z a-z 0-9 _ . -")]
Kind = Annotated[KindId, Path(description=KIND_DESCRIPTION)]
DryRun = Annotated[
    bool, Query(description="Answer whether the request would be admitted now, writing nothing")
]
HoldSeconds = Annotated[
    int | None,
    Query(
        ge=1,
        description="A hold: the units are held until confirmed (POST .../confirm) or released after "
        "this many seconds (at most the stack's HoldMaxSeconds, 24 h by default: above it, 400)",
    ),
]
PageSize = Annotated[int, Query(ge=1, le=100)]
NextToken = Annotated[str | None, Query(max_length=512)]


def resource_routes(service: Callable[[], ResourceService]) -> Router:
    router = Router()  # type: ignore[no-untyped-call]

    @router.get("/accounts/<account_id>/usage", responses=responses(ok(UsageOut, "Limits and use, per kind")))
    def get_usage(account_id: AccountId) -> Response[str]:
        return json_response(200, service().usage(account_id).to_json())

    # ---- a kind's resources ---------------------------------------------------------------------
    @router.post(
        "/accounts/<account_id>/kinds/<kind>/resources", responses=responses(AT_LIMIT, DRY_RUN, CREATED)
    )
    def create_kind_resource(
        account_id: AccountId,
        kind: Kind,
        body: Annotated[ResourceBody, Body()],
        dry_run: DryRun = False,
        hold_seconds: HoldSeconds = None,
    ) -> Response[str]:
        return _create(
            service(), account_id, kind, body, resource_id=None, dry_run=dry_run, hold=hold_seconds
        )

    @router.put(
        "/accounts/<account_id>/kinds/<kind>/resources/<resource_id>",
        responses=responses(PUT_CONFLICT, RESOURCE_OR_DRY_RUN, CREATED),
    )
    def put_kind_resource(
        account_id: AccountId,
        kind: Kind,
        resource_id: ResourceId,
        body: Annotated[ResourceBody, Body()],
        *,
        dry_run: DryRun = False,
        hold_seconds: HoldSeconds = None,
    ) -> Response[str]:
        return _create(
            service(), account_id, kind, body, resource_id=resource_id, dry_run=dry_run, hold=hold_seconds
        )

    @router.patch(
        "/accounts/<account_id>/kinds/<kind>/resources/<resource_id>",
        responses=responses(AT_LIMIT, NOT_FOUND, RESOURCE_OR_DRY_RUN),
    )
    def resize_kind_resource(
        account_id: AccountId,
        kind: Kind,
        resource_id: ResourceId,
        body: Annotated[ResizeBody, Body()],
        dry_run: DryRun = False,
    ) -> Response[str]:
        if dry_run:
            return json_response(
                200, service().would_resize(account_id, resource_id, body.units, kind=kind).to_json()
            )
        return json_response(200, service().resize(account_id, resource_id, body.units, kind=kind).to_json())

    @router.get(
        "/accounts/<account_id>/kinds/<kind>/resources/<resource_id>",
        responses=responses(NOT_FOUND, ok(ResourceOut, "The resource")),
    )
    def get_kind_resource(account_id: AccountId, kind: Kind, resource_id: ResourceId) -> Response[str]:
        return json_response(200, service().get(account_id, resource_id, kind=kind).to_json())

    @router.get(
        "/accounts/<account_id>/kinds/<kind>/resources",
        responses=responses(ok(ResourcePageOut, "A page of resources")),
    )
    def list_kind_resources(
        account_id: AccountId, kind: Kind, limit: PageSize = 50, next_token: NextToken = None
    ) -> Response[str]:
        return _list(service(), account_id, kind, limit, next_token)

    @router.delete(
        "/accounts/<account_id>/kinds/<kind>/resources/<resource_id>",
        responses=responses(NOT_FOUND, NO_CONTENT),
    )
    def delete_kind_resource(account_id: AccountId, kind: Kind, resource_id: ResourceId) -> Response[str]:
        service().delete(account_id, resource_id, kind=kind)
        return Response(status_code=204, body="")

    @router.post(
        "/accounts/<account_id>/kinds/<kind>/resources/<resource_id>/confirm",
        responses=responses(HOLD_EXPIRED, NOT_FOUND, ok(ResourceOut, "The resource, its hold confirmed")),
    )
    def confirm_kind_resource(account_id: AccountId, kind: Kind, resource_id: ResourceId) -> Response[str]:
        return json_response(200, service().confirm(account_id, resource_id, kind=kind).to_json())

    # ---- the default kind's resources (the routes from before kinds) ------------------------------
    @router.post("/accounts/<account_id>/resources", responses=responses(AT_LIMIT, DRY_RUN, CREATED))
    def create_resource(
        account_id: AccountId,
        body: Annotated[ResourceBody, Body()],
        dry_run: DryRun = False,
        hold_seconds: HoldSeconds = None,
    ) -> Response[str]:
        return _create(
            service(), account_id, None, body, resource_id=None, dry_run=dry_run, hold=hold_seconds
        )

    @router.put(
        "/accounts/<account_id>/resources/<resource_id>",
        responses=responses(PUT_CONFLICT, RESOURCE_OR_DRY_RUN, CREATED),
    )
    def put_resource(
        account_id: AccountId,
        resource_id: ResourceId,
        body: Annotated[ResourceBody, Body()],
        dry_run: DryRun = False,
        hold_seconds: HoldSeconds = None,
    ) -> Response[str]:
        return _create(
            service(), account_id, None, body, resource_id=resource_id, dry_run=dry_run, hold=hold_seconds
        )

    @router.get(
        "/accounts/<account_id>/resources/<resource_id>",
        responses=responses(NOT_FOUND, ok(ResourceOut, "The resource")),
    )
    def get_resource(account_id: AccountId, resource_id: ResourceId) -> Response[str]:
        return json_response(200, service().get(account_id, resource_id).to_json())

    @router.get(
        "/accounts/<account_id>/resources", responses=responses(ok(ResourcePageOut, "A page of resources"))
    )
    def list_resources(
        account_id: AccountId, limit: PageSize = 50, next_token: NextToken = None
    ) -> Response[str]:
        return _list(service(), account_id, None, limit, next_token)

    @router.post(
        "/accounts/<account_id>/resources/<resource_id>/confirm",
        responses=responses(HOLD_EXPIRED, NOT_FOUND, ok(ResourceOut, "The resource, its hold confirmed")),
    )
    def confirm_resource(account_id: AccountId, resource_id: ResourceId) -> Response[str]:
        return json_response(200, service().confirm(account_id, resource_id).to_json())

    @router.delete(
        "/accounts/<account_id>/resources/<resource_id>", responses=responses(NOT_FOUND, NO_CONTENT)
    )
    def delete_resource(account_id: AccountId, resource_id: ResourceId) -> Response[str]:
        service().delete(account_id, resource_id)
        return Response(status_code=204, body="")

    return router


def _create(
    service: ResourceService,
    account_id: str,
    kind: str | None,
    body: ResourceBody,
    *,
    resource_id: str | None,
    dry_run: bool,
    hold: int | None = None,
) -> Response[str]:
    extra = body.extra_fields()
    if dry_run:
        answer = service.would_create(
            account_id, body.name, extra, resource_id, kind=kind, units=body.units, hold_seconds=hold
        )
        return json_response(200, answer.to_json())
    resource, created = service.create(
        account_id, body.name, extra, resource_id, kind=kind, units=body.units, hold_seconds=hold
    )
    return json_response(201 if created else 200, resource.to_json())


def _list(
    service: ResourceService, account_id: str, kind: str | None, page_size: int, next_token: str | None
) -> Response[str]:
    page = service.list(account_id, page_size, next_token, kind=kind)
    return json_response(200, {"items": [r.to_json() for r in page.items], "next_token": page.next_token})
