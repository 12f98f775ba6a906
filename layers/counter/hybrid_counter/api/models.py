"""Request bodies. Unknown fields in a resource body are kept and returned with the resource."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from aws_lambda_powertools.event_handler.openapi.models import Example
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
    field_validator,
    model_validator,
)

from hybrid_counter.keys import ID_PATTERN, RESERVED_KINDS, check_kind


def _decimal_digits(value: object) -> object:
    # Query strings are parsed by pydantic's lax rules, which read "+5", " 5" and "1_0" as 5 and
    # 10; a count in a URL is written in decimal digits only, anything else a 400.
    if isinstance(value, str) and not (value.isascii() and value.isdigit()):
        raise ValueError("expected a whole number written in decimal digits")
    return value


# Metadata for every integer query parameter (beside its Query()).
DecimalDigits = BeforeValidator(_decimal_digits)
RESERVED_FIELDS = frozenset({"account_id", "resource_id", "created_at", "kind", "held", "expires_at"})
MAX_LIMIT = 1_000_000_000
Count = Annotated[StrictInt, Field(ge=0, le=MAX_LIMIT)]
Units = Annotated[StrictInt, Field(ge=1, le=MAX_LIMIT, description="Units of its kind the resource holds")]
# Every kind the API is given (a path's {kind}, a plan's limits, the history's filter) is this:
# the id pattern, and not a word a route uses (keys.RESERVED_KINDS, said in the description too).
KindId = Annotated[
    str,
    Field(pattern=ID_PATTERN, json_schema_extra={"not": {"enum": sorted(RESERVED_KINDS)}}),
    AfterValidator(check_kind),
]
KIND_DESCRIPTION = (
    "Kind of resource, e.g. projects, seats, volume_gb: 1-64 of A-Z a-z 0-9 _ . -, "
    f"not {' or '.join(sorted(RESERVED_KINDS))} (reserved: the routes use the word)"
)


class LimitBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    limit: Count
    force: Annotated[StrictBool, Field(description="Apply it even below the kind's current use")] = False


class PlanBody(BaseModel):
    """A plan's limits, replacing the ones it had: {"<kind>": <limit>, ...}."""

    model_config = ConfigDict(extra="forbid")

    limits: Annotated[dict[KindId, Count], Field(max_length=1000)]


class AccountPlanBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    plan_id: Annotated[StrictStr, Field(pattern=ID_PATTERN)]
    force: Annotated[StrictBool, Field(description="Move it even if a kind would be below current use")] = (
        False
    )


class OrgBody(BaseModel):
    """An organization's plan: it is created on it, or moved to it."""

    model_config = ConfigDict(extra="forbid")

    plan_id: Annotated[StrictStr, Field(pattern=ID_PATTERN)]
    force: Annotated[
        StrictBool, Field(description="Move it even if a kind would be below the organization's current use")
    ] = False
    shards: Annotated[
        Literal[1, 2, 4, 8, 16] | None,
        Field(
            description=(
                "Split each of its counters over this many items (a busy organization's admissions "
                "then go to one of them each: design.md §10); absent: unchanged (1 for a new one)"
            )
        ),
    ] = None

    @field_validator("shards", mode="before")
    @classmethod
    def _shards_an_integer(cls, value: Any) -> Any:
        """An integer, as its schema says: a JSON true equals 1 and 1.0 does too (the literal
        alone took ``"shards": true`` for 1 and merged a split organization)."""
        if value is not None and type(value) is not int:
            raise ValueError("shards must be an integer: 1, 2, 4, 8 or 16")
        return value


class ResizeBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    units: Units


class ResourceBody(BaseModel):
    model_config = ConfigDict(extra="allow")

    name: Annotated[StrictStr, Field(min_length=1, max_length=256)]
    units: Units = 1

    @model_validator(mode="after")
    def _no_reserved_fields(self) -> ResourceBody:
        reserved = RESERVED_FIELDS.intersection(self.model_extra or {})
        if reserved:
            raise ValueError(f"fields set by the service cannot be given: {', '.join(sorted(reserved))}")
        return self

    def extra_fields(self) -> dict[str, Any]:
        return dict(self.model_extra or {})


# ---- examples of the request bodies (the reference shows them; tests/unit/test_openapi_document.py
# checks each is a valid body) ----------------------------------------------------------------------
RESOURCE_EXAMPLES = {
    "seat": Example(summary="One unit of the kind", value={"name": "alice"}),
    "units": Example(
        summary="Several units, and a field of the caller's own (returned with the resource)",
        value={"name": "checkout-42", "units": 3, "team": "payments"},
    ),
}
RESIZE_EXAMPLES = {"resize": Example(summary="Hold 5 units from now on", value={"units": 5})}
LIMIT_EXAMPLES = {
    "limit": Example(summary="A limit of 12", value={"limit": 12}),
    "forced": Example(summary="Below current use, applied anyway", value={"limit": 2, "force": True}),
}
PLAN_EXAMPLES = {"plan": Example(summary="A limit per kind", value={"limits": {"projects": 3, "seats": 12}})}
ACCOUNT_PLAN_EXAMPLES = {
    "plan": Example(summary="Move the account to the pro plan", value={"plan_id": "pro"})
}
ORG_EXAMPLES = {
    "plan": Example(summary="Create it (or move it) on a plan", value={"plan_id": "enterprise"}),
    "shards": Example(
        summary="A busy organization: its counters split over 4 items",
        value={"plan_id": "enterprise", "shards": 4},
    ),
}
