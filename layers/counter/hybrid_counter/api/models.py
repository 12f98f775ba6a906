"""Request bodies. Unknown fields in a resource body are kept and returned with the resource."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr, model_validator

RESERVED_FIELDS = frozenset({"account_id", "resource_id", "created_at"})


class LimitBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    limit: Annotated[StrictInt, Field(ge=0, le=1_000_000_000)]


class ResourceBody(BaseModel):
    model_config = ConfigDict(extra="allow")

    name: Annotated[StrictStr, Field(min_length=1, max_length=256)]

    @model_validator(mode="after")
    def _no_reserved_fields(self) -> ResourceBody:
        reserved = RESERVED_FIELDS.intersection(self.model_extra or {})
        if reserved:
            raise ValueError(f"fields set by the service cannot be given: {', '.join(sorted(reserved))}")
        return self

    def extra_fields(self) -> dict[str, Any]:
        return dict(self.model_extra or {})
