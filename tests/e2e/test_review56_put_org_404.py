"""Review 56: `PUT /orgs/{o}` (create, or move to a plan) must never answer 404 (design.md §10,
F2: "no order explains a PUT's 404"). Raced against `DELETE /orgs/{o}` of the same id over HTTP."""

from __future__ import annotations

import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.e2e.conftest import Target

pytestmark = pytest.mark.e2e

SEATS = "seats"


@pytest.mark.parametrize("shards", [None, 1, 4])
def test_a_put_of_an_organization_racing_its_deletion_never_answers_404(target: Target, shards: int) -> None:
    plan, org = f"p-{uuid.uuid4().hex[:8]}", f"o-{uuid.uuid4().hex[:8]}"
    assert target.call("PUT", f"/plans/{plan}", {"limits": {SEATS: 6}}).status_code == 200
    assert target.call("PUT", f"/orgs/{org}", {"plan_id": plan, "shards": shards or 1}).status_code == 201
    answers: Counter[tuple[str, int]] = Counter()
    bodies: list[str] = []

    def one(n: int) -> None:
        if n % 2:
            response = target.call("DELETE", f"/orgs/{org}")
        else:
            body = {"plan_id": plan} if shards is None else {"plan_id": plan, "shards": shards}
            response = target.call("PUT", f"/orgs/{org}", body)
            if response.status_code == 404:
                bodies.append(response.text)
        answers[(response.request.method or "", response.status_code)] += 1

    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(one, range(160)))
    print(dict(answers))
    assert not bodies, (dict(answers), bodies[:3])
