"""The API path: limits, usage, reads, and the create/delete flows with the best-effort counter.

The eventual counter is only ever increased by the stream path; a delete's release takes a
resource out of both counters at once (counters/store.py).
"""

from hybrid_counter.resources.items import Resource
from hybrid_counter.resources.service import ResourcePage, ResourceService
from hybrid_counter.usage import Usage

__all__ = ["Resource", "ResourcePage", "ResourceService", "Usage"]
