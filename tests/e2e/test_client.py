"""The Python client (clients/python) against the running API: every kind of call, typed results
and typed errors, sync and asyncio."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from hybrid_counter_client import (
    AccountPlan,
    AsyncClient,
    Client,
    Forbidden,
    IdempotencyConflict,
    KindBelowUsage,
    LimitBelowUsage,
    LimitExceeded,
    Membership,
    MembershipConflict,
    NotFound,
    OrgOverride,
    OrgRoom,
    Override,
    Plan,
    TopAccount,
    Unauthorized,
    ValidationError,
    WouldAdmit,
)
from tests.e2e.conftest import Target

pytestmark = pytest.mark.e2e


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def tokens(target: Target):
    if target.tokens is None:
        pytest.skip("no tokens for this target")
    return target.tokens


def operator(target: Target) -> Client:
    return Client(target.api_url, auth=tokens(target).operator)


def tenant(target: Target, account: str) -> Client:
    return Client(target.api_url, auth=lambda: tokens(target).tenant_token(account))


def test_walkthrough_plan_kinds_override_limit_resize_dry_run_history(target):
    account, plan_id = new_id("client"), new_id("plan")
    with operator(target) as op, tenant(target, account) as api:
        # A plan with two kinds, and the account on it (before its first request: plans are cached).
        plan = op.put_plan(plan_id, {"projects": 2, "volume_gb": 100})
        assert plan == Plan(plan_id, {"projects": 2, "volume_gb": 100})
        assert op.get_plan(plan_id) == plan
        assert plan in op.list_plans(page_size=100)
        assert op.assign_plan(account, plan_id) == AccountPlan(account, plan_id)

        # Projects: two fit; the third is refused, and a dry run says so first.
        web = api.create(account, "web", kind="projects", fields={"team": "blue"})
        assert (web.kind, web.units, web.fields, web.created) == ("projects", 1, {"team": "blue"}, True)
        safe = api.create(account, "api", kind="projects", retry_safe=True)
        assert (safe.created, len(safe.resource_id)) == (True, 32)
        assert api.would_create(account, "db", kind="projects") == WouldAdmit(
            False, "projects", 1, 2, 2, 0, scope="account"
        )
        with pytest.raises(LimitExceeded) as at_limit:
            api.create(account, "db", kind="projects")
        assert (at_limit.value.kind, at_limit.value.limit, at_limit.value.used) == ("projects", 2, 2)

        # An override lifts the limit; a PUT is idempotent, and refuses another body for its id.
        assert op.set_override(account, "projects", 3) == Override(account, 3, "projects")
        assert api.would_put(account, "db-1", "db", kind="projects").would_admit is True
        assert api.put(account, "db-1", "db", kind="projects").created is True
        assert api.put(account, "db-1", "db", kind="projects").created is False
        with pytest.raises(IdempotencyConflict):
            api.put(account, "db-1", "another body", kind="projects")

        # Limits below use are refused unless forced.
        with pytest.raises(LimitBelowUsage) as below:
            op.set_override(account, "projects", 1)
        assert below.value.kinds == (KindBelowUsage("projects", 1, 3),)
        with pytest.raises(LimitBelowUsage):
            op.remove_override(account, "projects")  # back to the plan's 2, below the 3 in use
        op.remove_override(account, "projects", force=True)

        # Units: a 60 GB volume, resized by target.
        disk = api.create(account, "disk", kind="volume_gb", units=60)
        assert api.would_resize(account, disk.resource_id, 120, kind="volume_gb") == WouldAdmit(
            False, "volume_gb", 60, 100, 60, 40, scope="account"
        )
        with pytest.raises(LimitExceeded) as too_big:
            api.resize(account, disk.resource_id, 120, kind="volume_gb")
        assert (too_big.value.kind, too_big.value.limit, too_big.value.used) == ("volume_gb", 100, 60)
        assert api.resize(account, disk.resource_id, 100, kind="volume_gb").units == 100
        assert api.resize(account, disk.resource_id, 40, kind="volume_gb").units == 40

        usage = api.usage(account)
        assert usage.plan_id == plan_id
        projects, volume = usage.kinds["projects"], usage.kinds["volume_gb"]
        assert (projects.limit, projects.limit_source, projects.best_effort) == (2, "plan", 3)
        assert (volume.limit, volume.best_effort, volume.remaining) == (100, 40, 60)
        assert {kind: u.limit for kind, u in op.limits(account).kinds.items()} == {
            kind: u.limit for kind, u in usage.kinds.items()
        }

        # A listing, a page per request.
        listing = api.list_resources(account, kind="projects", page_size=1)
        assert sorted(resource.name for resource in listing) == ["api", "db", "web"]
        assert len(list(listing.pages())) >= 3
        api.delete(account, web.resource_id, kind="projects")
        with pytest.raises(NotFound):
            api.get(account, web.resource_id, kind="projects")
        assert api.get(account, "db-1", kind="projects").name == "db"

        # History, newest first, with who made each change.
        changes = list(op.account_history(account, page_size=2))
        assert [(c.what, c.old, c.new, c.force) for c in changes] == [
            ("override_removed", 3, None, True),
            ("override", None, 3, False),
            ("account_plan", "default", plan_id, False),
        ]
        assert {c.by for c in changes} == {"local-client"} or target.runtime is None
        assert [c.what for c in op.account_history(account, kind="projects")] == [
            "override_removed",
            "override",
        ]
        (plan_change,) = op.plan_history(plan_id)
        assert (plan_change.what, plan_change.new, plan_change.plan_id) == (
            "plan_limits",
            {"projects": 2, "volume_gb": 100},
            plan_id,
        )


def test_refusals_are_typed_and_a_rejected_token_is_replaced_once(target):
    account, other = new_id("client"), new_id("client")
    with tenant(target, account) as api:
        with pytest.raises(Forbidden) as not_yours:  # the API's own answer
            api.usage(other)
        assert (not_yours.value.status, not_yours.value.code) == (403, "Forbidden")
        assert "may not act on that account" in not_yours.value.message
        with pytest.raises(Forbidden) as no_scope:  # API Gateway's: the operator scope is missing
            api.set_limit(account, 5)
        assert no_scope.value.message == "Forbidden"
        with pytest.raises(ValidationError):
            api.put(account, "not an id", "web")
    with operator(target) as op, pytest.raises(NotFound):
        op.get_plan(new_id("no-such-plan"))
    with Client(target.api_url) as anonymous, pytest.raises(Unauthorized) as no_token:
        anonymous.usage(account)
    assert (no_token.value.status, no_token.value.message) == (401, "Unauthorized")

    handed_out: list[str] = []

    def expired_then_valid() -> str:
        handed_out.append("not-a-valid-token" if not handed_out else tokens(target).tenant_token(account))
        return handed_out[-1]

    with Client(target.api_url, auth=expired_then_valid) as api:
        assert api.usage(account).account_id == account
        assert api.usage(account).account_id == account  # the new token is kept
    assert len(handed_out) == 2


def test_async_client_on_the_default_kind_with_the_legacy_limit(target):
    account = new_id("client")
    with operator(target) as op:
        assert op.set_limit(account, 1) == Override(account, 1)

    async def scenario() -> None:
        async with AsyncClient(target.api_url, auth=lambda: tokens(target).tenant_token(account)) as api:
            created = await api.create(account, "web", fields={"size": 2})
            assert (created.created, created.fields) == (True, {"size": 2})
            with pytest.raises(LimitExceeded) as at_limit:
                await api.create(account, "second", retry_safe=True)
            assert (at_limit.value.limit, at_limit.value.used) == (1, 1)
            assert (await api.usage(account)).best_effort == 1
            assert [r.resource_id async for r in api.list_resources(account)] == [created.resource_id]
            await api.delete(account, created.resource_id)
            with pytest.raises(NotFound):
                await api.get(account, created.resource_id)

    asyncio.run(scenario())


def org_admin(target: Target, org: str) -> Client:
    return Client(target.api_url, auth=lambda: tokens(target).org_admin_token(org))


def test_organizations_through_the_client(target):
    org, plan_id, first, second = new_id("org"), new_id("plan"), new_id("member"), new_id("member")
    with operator(target) as op, tenant(target, first) as api_first, tenant(target, second) as api_second:
        # An organization of 3 seats over two members of 2 seats each
        op.put_plan(plan_id, {"seats": 3})
        members_plan = new_id("plan")
        op.put_plan(members_plan, {"seats": 2})
        created = op.put_org(org, plan_id)
        assert (created.org_id, created.plan_id, created.members, created.created) == (org, plan_id, 0, True)
        assert op.put_org(org, plan_id).created is False
        for account in (first, second):
            op.assign_plan(account, members_plan)
            assert op.add_member(org, account) == Membership(org, account, joined=True)
        assert op.add_member(org, first).joined is False
        assert op.get_org(org).members == 2

        # Two seats each would be four: the third is refused by the organization
        api_first.create(first, "a", kind="seats", units=2)
        with pytest.raises(LimitExceeded) as refused:
            api_second.create(second, "b", kind="seats", units=2)
        assert (refused.value.scope, refused.value.limit, refused.value.used) == ("organization", 3, 2)
        api_second.create(second, "b", kind="seats")  # the organization's last seat

        # Usage: the member's own, with its organization's room; the organization's, by member
        target.settle()
        usage = api_second.usage(second)
        assert usage.org_id == org
        assert usage.kinds["seats"].organization == OrgRoom(org, 3, "plan", 3, 0)
        with org_admin(target, org) as admin:
            by_admin = admin.org_usage(org, top=1)
            assert by_admin == op.org_usage(org, top=1)
            assert by_admin.kinds["seats"].top_accounts == [TopAccount(first, 2)]
            assert admin.get_org(org) == op.get_org(org)
            # its administrator reads, and changes nothing (API Gateway: not the operator scope)
            with pytest.raises(Forbidden):
                admin.set_org_limit(org, "seats", 10)
        with org_admin(target, new_id("org")) as stranger, pytest.raises(Forbidden):
            stranger.org_usage(org)

        # An override, refused below use unless forced, recorded in history
        with pytest.raises(LimitBelowUsage):
            op.set_org_limit(org, "seats", 2)
        assert op.set_org_limit(org, "seats", 5) == OrgOverride(org, "seats", 5)
        op.remove_org_limit(org, "seats")
        whats = [change.what for change in op.org_history(org, page_size=1)]
        assert whats == ["override_removed", "override", "org_plan"]
        assert {change.org_id for change in op.org_history(org)} == {org}

        # Membership and deletion refused with a typed code
        with pytest.raises(MembershipConflict) as not_empty:
            op.remove_member(org, first)
        assert not_empty.value.code == "AccountNotEmpty"
        with pytest.raises(MembershipConflict) as has_members:
            op.delete_org(org)
        assert has_members.value.code == "OrganizationNotEmpty"
        with pytest.raises(NotFound):
            op.get_org(new_id("missing"))

        # Emptied, the members leave and the organization goes
        for api, account in ((api_first, first), (api_second, second)):
            for resource in api.list_resources(account, kind="seats"):
                api.delete(account, resource.resource_id, kind="seats")
        target.settle()
        for account in (first, second):
            op.remove_member(org, account)
        op.delete_org(org)
        op.delete_org(org, missing_ok=True)
        with pytest.raises(NotFound):
            op.get_org(org)


def test_the_async_client_reads_an_organization(target):
    org, plan_id = new_id("org"), new_id("plan")
    with operator(target) as op:
        op.put_plan(plan_id, {"seats": 4})
        op.put_org(org, plan_id)

    async def scenario() -> tuple[str, int, list[str]]:
        async with AsyncClient(target.api_url, auth=tokens(target).operator) as api:
            usage = await api.org_usage(org, top=0)
            fetched = await api.get_org(org)
            whats = [change.what async for change in api.org_history(org)]
            await api.delete_org(org)
            return fetched.plan_id, usage.kinds["seats"].limit, whats

    assert asyncio.run(scenario()) == (plan_id, 4, ["org_plan"])


def test_a_delete_without_the_resources_kind_is_not_found_and_says_where_it_looked(target):
    account, plan_id = new_id("client"), new_id("plan")
    with operator(target) as op, tenant(target, account) as api:
        # Given a seats resource (a plan with seats, the account on it before its first request)
        op.put_plan(plan_id, {"seats": 5})
        op.assign_plan(account, plan_id)
        team = api.create(account, "team", kind="seats", units=2)
        # When it is deleted without kind=: the routes without a kind look in the default kind
        with pytest.raises(NotFound) as missed:
            api.delete(account, team.resource_id)
        # Then the error says so, and that kind= exists; with its kind the delete works
        assert missed.value.hint is not None
        assert "default kind" in str(missed.value)
        assert "kind=" in str(missed.value)
        api.delete(account, team.resource_id, kind="seats")
        with pytest.raises(NotFound):
            api.get(account, team.resource_id, kind="seats")
