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
    HOLDS,
    NO_CONTENT,
    NOT_FOUND,
    PAGE_EXAMPLE,
    PUT_CONFLICT,
    RESIZE_CONFLICT,
    RESOURCE_EXAMPLE,
    RESOURCE_OR_DRY_RUN,
    RESOURCES,
    USAGE,
    USAGE_EXAMPLE,
    ResourceOut,
    ResourcePageOut,
    UsageOut,
    ok,
    responses,
)
from hybrid_counter.api.json_response import json_response
from hybrid_counter.api.models import (
    KIND_DESCRIPTION,
    RESIZE_EXAMPLES,
    RESOURCE_EXAMPLES,
    DecimalDigits,
    KindId,
    ResizeBody,
    ResourceBody,
)
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
    DecimalDigits,
    Query(
        ge=1,
        description="A hold: the units are held until confirmed (POST .../confirm) or released after "
        "this many seconds (at most the stack's HoldMaxSeconds, 24 h by default: above it, 400)",
    ),
]
PageSize = Annotated[int, DecimalDigits, Query(ge=1, le=100)]
NextToken = Annotated[str | None, Query(max_length=512)]


def resource_routes(service: Callable[[], ResourceService]) -> Router:
    router = Router()  # type: ignore[no-untyped-call]

    @router.get(
        "/accounts/<account_id>/usage",
        summary="Get the account's limits and usage",
        description="Per kind: its limit (and where it comes from: the plan or an override), what is used "
        "and what remains; for a member of an organization, the organization's room too. The figures a "
        "create is judged by. The account's own token.",
        tags=[USAGE],
        operation_id="getUsage",
        responses=responses(ok(UsageOut, "Limits and use, per kind", USAGE_EXAMPLE)),
    )
    def get_usage(account_id: AccountId) -> Response[str]:
        return json_response(200, service().usage(account_id).to_json())

    # ---- a kind's resources ---------------------------------------------------------------------
    @router.post(
        "/accounts/<account_id>/kinds/<kind>/resources",
        summary="Create a resource of a kind",
        description="Admits the resource and its units under the account's limit for the kind (and its "
        "organization's), or refuses it with 409 LimitExceeded; the service picks its id. ?dry_run=true "
        "says whether it would be admitted, writing nothing; ?hold_seconds=N holds the units until confirmed.",
        tags=[RESOURCES],
        operation_id="createKindResource",
        responses=responses(CREATED, DRY_RUN, AT_LIMIT),
    )
    def create_kind_resource(
        account_id: AccountId,
        kind: Kind,
        body: Annotated[ResourceBody, Body(openapi_examples=RESOURCE_EXAMPLES)],
        dry_run: DryRun = False,
        hold_seconds: HoldSeconds = None,
    ) -> Response[str]:
        return _create(
            service(), account_id, kind, body, resource_id=None, dry_run=dry_run, hold=hold_seconds
        )

    @router.put(
        "/accounts/<account_id>/kinds/<kind>/resources/<resource_id>",
        summary="Create a resource of a kind with the caller's id",
        description="Idempotent: the first PUT creates it (201), a repeat of the same body answers 200 with "
        "the resource, another body 409 IdempotencyConflict. Refused with 409 LimitExceeded when the kind "
        "has no room.",
        tags=[RESOURCES],
        operation_id="putKindResource",
        responses=responses(CREATED, RESOURCE_OR_DRY_RUN, PUT_CONFLICT),
    )
    def put_kind_resource(
        account_id: AccountId,
        kind: Kind,
        resource_id: ResourceId,
        body: Annotated[ResourceBody, Body(openapi_examples=RESOURCE_EXAMPLES)],
        *,
        dry_run: DryRun = False,
        hold_seconds: HoldSeconds = None,
    ) -> Response[str]:
        return _create(
            service(), account_id, kind, body, resource_id=resource_id, dry_run=dry_run, hold=hold_seconds
        )

    @router.patch(
        "/accounts/<account_id>/kinds/<kind>/resources/<resource_id>",
        summary="Resize a resource",
        description="Sets how many units the resource holds: growing is admitted under the limit like a "
        "create (409 LimitExceeded otherwise; a hold past its deadline is not grown: 409 HoldExpired); "
        "shrinking gives units back.",
        tags=[RESOURCES],
        operation_id="resizeKindResource",
        responses=responses(RESOURCE_OR_DRY_RUN, RESIZE_CONFLICT, NOT_FOUND),
    )
    def resize_kind_resource(
        account_id: AccountId,
        kind: Kind,
        resource_id: ResourceId,
        body: Annotated[ResizeBody, Body(openapi_examples=RESIZE_EXAMPLES)],
        dry_run: DryRun = False,
    ) -> Response[str]:
        if dry_run:
            return json_response(
                200, service().would_resize(account_id, resource_id, body.units, kind=kind).to_json()
            )
        return json_response(200, service().resize(account_id, resource_id, body.units, kind=kind).to_json())

    @router.get(
        "/accounts/<account_id>/kinds/<kind>/resources/<resource_id>",
        summary="Get a resource of a kind",
        description="The resource as created, with the caller's own fields.",
        tags=[RESOURCES],
        operation_id="getKindResource",
        responses=responses(ok(ResourceOut, "The resource", RESOURCE_EXAMPLE), NOT_FOUND),
    )
    def get_kind_resource(account_id: AccountId, kind: Kind, resource_id: ResourceId) -> Response[str]:
        return json_response(200, service().get(account_id, resource_id, kind=kind).to_json())

    @router.get(
        "/accounts/<account_id>/kinds/<kind>/resources",
        summary="List resources of a kind",
        description="A page of the account's resources of the kind; pass next_token back for the next page.",
        tags=[RESOURCES],
        operation_id="listKindResources",
        responses=responses(ok(ResourcePageOut, "A page of resources", PAGE_EXAMPLE)),
    )
    def list_kind_resources(
        account_id: AccountId, kind: Kind, limit: PageSize = 50, next_token: NextToken = None
    ) -> Response[str]:
        return _list(service(), account_id, kind, limit, next_token)

    @router.delete(
        "/accounts/<account_id>/kinds/<kind>/resources/<resource_id>",
        summary="Delete a resource of a kind",
        description="Deletes it and gives its units back to the kind's limit (and the organization's).",
        tags=[RESOURCES],
        operation_id="deleteKindResource",
        responses=responses(NO_CONTENT, NOT_FOUND),
    )
    def delete_kind_resource(account_id: AccountId, kind: Kind, resource_id: ResourceId) -> Response[str]:
        service().delete(account_id, resource_id, kind=kind)
        return Response(status_code=204, body="")

    @router.post(
        "/accounts/<account_id>/kinds/<kind>/resources/<resource_id>/confirm",
        summary="Confirm a hold",
        description="Makes a held resource (created with ?hold_seconds) permanent before its deadline "
        "(expires_at); after it, 409 HoldExpired: its units were released. A repeat answers the same.",
        tags=[HOLDS],
        operation_id="confirmKindResource",
        responses=responses(
            ok(ResourceOut, "The resource, its hold confirmed", RESOURCE_EXAMPLE), HOLD_EXPIRED, NOT_FOUND
        ),
    )
    def confirm_kind_resource(account_id: AccountId, kind: Kind, resource_id: ResourceId) -> Response[str]:
        return json_response(200, service().confirm(account_id, resource_id, kind=kind).to_json())

    # ---- the default kind's resources (the routes from before kinds) ------------------------------
    @router.post(
        "/accounts/<account_id>/resources",
        summary="Create a resource (default kind)",
        description="As createKindResource, for the stack's default kind (DefaultKind).",
        tags=[RESOURCES],
        operation_id="createResource",
        responses=responses(CREATED, DRY_RUN, AT_LIMIT),
    )
    def create_resource(
        account_id: AccountId,
        body: Annotated[ResourceBody, Body(openapi_examples=RESOURCE_EXAMPLES)],
        dry_run: DryRun = False,
        hold_seconds: HoldSeconds = None,
    ) -> Response[str]:
        return _create(
            service(), account_id, None, body, resource_id=None, dry_run=dry_run, hold=hold_seconds
        )

    @router.put(
        "/accounts/<account_id>/resources/<resource_id>",
        summary="Create a resource with the caller's id (default kind)",
        description="As putKindResource, for the stack's default kind: idempotent.",
        tags=[RESOURCES],
        operation_id="putResource",
        responses=responses(CREATED, RESOURCE_OR_DRY_RUN, PUT_CONFLICT),
    )
    def put_resource(
        account_id: AccountId,
        resource_id: ResourceId,
        body: Annotated[ResourceBody, Body(openapi_examples=RESOURCE_EXAMPLES)],
        dry_run: DryRun = False,
        hold_seconds: HoldSeconds = None,
    ) -> Response[str]:
        return _create(
            service(), account_id, None, body, resource_id=resource_id, dry_run=dry_run, hold=hold_seconds
        )

    @router.get(
        "/accounts/<account_id>/resources/<resource_id>",
        summary="Get a resource (default kind)",
        description="As getKindResource, for the stack's default kind.",
        tags=[RESOURCES],
        operation_id="getResource",
        responses=responses(ok(ResourceOut, "The resource", RESOURCE_EXAMPLE), NOT_FOUND),
    )
    def get_resource(account_id: AccountId, resource_id: ResourceId) -> Response[str]:
        return json_response(200, service().get(account_id, resource_id).to_json())

    @router.get(
        "/accounts/<account_id>/resources",
        summary="List resources (default kind)",
        description="As listKindResources, for the stack's default kind.",
        tags=[RESOURCES],
        operation_id="listResources",
        responses=responses(ok(ResourcePageOut, "A page of resources", PAGE_EXAMPLE)),
    )
    def list_resources(
        account_id: AccountId, limit: PageSize = 50, next_token: NextToken = None
    ) -> Response[str]:
        return _list(service(), account_id, None, limit, next_token)

    @router.post(
        "/accounts/<account_id>/resources/<resource_id>/confirm",
        summary="Confirm a hold (default kind)",
        description="As confirmKindResource, for the stack's default kind.",
        tags=[HOLDS],
        operation_id="confirmResource",
        responses=responses(
            ok(ResourceOut, "The resource, its hold confirmed", RESOURCE_EXAMPLE), HOLD_EXPIRED, NOT_FOUND
        ),
    )
    def confirm_resource(account_id: AccountId, resource_id: ResourceId) -> Response[str]:
        return json_response(200, service().confirm(account_id, resource_id).to_json())

    @router.delete(
        "/accounts/<account_id>/resources/<resource_id>",
        summary="Delete a resource (default kind)",
        description="As deleteKindResource, for the stack's default kind.",
        tags=[RESOURCES],
        operation_id="deleteResource",
        responses=responses(NO_CONTENT, NOT_FOUND),
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
