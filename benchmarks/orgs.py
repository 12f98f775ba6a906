"""Organizations (issue 24): what membership costs a create and a delete, and what the org usage
read costs as the organization grows. Counts and units from the meter, in one run.

**Cost.** Two accounts with the same override (so neither reads a plan, as in cost.py): one in
no organization, one a member of an organization on a stored plan. Each makes its kind's first
create (the kind is registered on the account's profile then: a read of the profile and a write
of it), then ``creates`` more (the steady state), then the stream path counts them (the member's
records at both levels: its account's partition, and its organization's, whose counter item's
admissions are what the stream path counts there), then every resource is deleted and the
stream path runs again. Before either, another member of the organization makes one create, so
the organization's plan is in the service's caches; that create is reported on its own (the
first create of an organization in a process).

**Org usage.** Organizations of 10, 100 and 1,000 member accounts, seeded through the table as
the API and the stream path leave them (seed.organization_members; account n holds 1 to 10
resources), read with ``service.org_usage(org, top=5)``: the organization's profile, its counter
items (one Query), its plan (cached), and per kind the top accounts by one Query of the sparse
OrgUsageIndex (``top`` keys). Read twice, through a new service (caches cold) and again (warm),
and checked against what was seeded.
"""

from __future__ import annotations

import uuid
from typing import Any

from benchmarks import seed
from benchmarks.meter import Tally
from benchmarks.world import BenchWorld
from hybrid_counter.counting.eventual import EventualCounter
from hybrid_counter.keys import org_usage_keys
from hybrid_counter.resources import ResourceService

COMPARED = ("requests", "read_units", "total_write_units")
# The phases of one account's lifecycle, as reported (per create, or per delete).
PHASES = (
    "first_create",
    "create",
    "stream_account_per_create",
    "stream_org_per_create",
    "stream_per_create",
    "delete",
    "stream_account_per_delete",
    "stream_org_per_delete",
    "stream_per_delete",
    "lifecycle",
)
USAGE_SIZES = (10, 100, 1_000)
SPLIT_USAGE = 16  # the usage read again at the largest size, the organization split over 16
TOP = 5


def new_ids() -> tuple[str, str]:
    """A fresh plan id and organization id."""
    return f"orgbench-{uuid.uuid4().hex[:8]}", f"org-{uuid.uuid4().hex[:10]}"


def difference(member: dict[str, Any], plain: dict[str, Any]) -> dict[str, Any]:
    """What a phase costs a member beyond an account in no organization: the compared figures
    and the requests by operation."""
    operations = sorted({*member["requests_by_operation"], *plain["requests_by_operation"]})
    by_operation = {
        op: round(
            member["requests_by_operation"].get(op, 0.0) - plain["requests_by_operation"].get(op, 0.0), 3
        )
        for op in operations
    }
    return {
        **{figure: round(member[figure] - plain[figure], 3) for figure in COMPARED},
        **{
            figure: round(member[figure] - plain[figure], 3)
            for figure in ("index_write_units", "transaction_index_write_units")
        },
        "requests_by_operation": {op: n for op, n in by_operation.items() if n},
    }


def held(n: int) -> int:
    """Resources account n of a seeded organization holds: 1 to 10."""
    return 1 + (n * 7) % 10


# ---- cost --------------------------------------------------------------------------------------
def cost(world: BenchWorld, creates: int) -> dict[str, Any]:
    service = world.service()
    plan_id, org = new_ids()
    service.put_plan(plan_id, {world.settings.default_kind: 1_000_000})
    service.put_org(org, plan_id)
    first_member, member, plain = (world.account(f"org-{role}") for role in ("first", "member", "plain"))
    for account in (first_member, member):
        service.add_member(org, account)
    for account in (first_member, member, plain):
        service.set_limit(account, 10 * creates)  # an override, as in cost.py: no plan read
    counter = world.counter()
    with world.meter.labeled("orgs:first_of_org") as first_of_org:
        service.create(first_member, "first", {})
    world.deliver(first_member, counter)
    world.deliver_org(org, counter)
    figures = {
        "not_member": _lifecycle(world, service, counter, plain, org=None, creates=creates),
        "member": _lifecycle(world, service, counter, member, org=org, creates=creates),
    }
    return {
        "creates": creates,
        **figures,
        # The organization's first create in this process, beyond a member's first create of its
        # kind once the organization's plan is cached (its plan's reads).
        "first_of_org": first_of_org.per(1),
        "first_of_org_extra": difference(first_of_org.per(1), figures["member"]["first_create"]),
        "extra": {
            phase: difference(figures["member"][phase], figures["not_member"][phase]) for phase in PHASES
        },
        # The kind's first create beyond the steady state's, for each account.
        "first_create_extra": {
            name: difference(f["first_create"], f["create"]) for name, f in figures.items()
        },
        "exact": _exact(service, member, org) and _exact(service, plain, None),
    }


def _lifecycle(
    world: BenchWorld,
    service: ResourceService,
    counter: EventualCounter,
    account: str,
    *,
    org: str | None,
    creates: int,
) -> dict[str, Any]:
    """One account's first create, steady creates, deletes, and the stream path after each."""
    name = "member" if org else "not_member"

    def label(phase: str) -> str:
        return f"orgs:{name}:{phase}"

    def stream(phase: str) -> None:
        with world.meter.labeled(label(f"stream_account_{phase}")):
            world.deliver(account, counter)
        with world.meter.labeled(label(f"stream_org_{phase}")):
            if org is not None:
                world.deliver_org(org, counter)

    with world.meter.labeled(label("first_create")):
        ids = [service.create(account, "r0", {})[0].resource_id]
    with world.meter.labeled(label("create")):
        ids += [service.create(account, f"r{n}", {})[0].resource_id for n in range(1, creates + 1)]
    stream("after_creates")
    with world.meter.labeled(label("delete")):
        for rid in ids:
            service.delete(account, rid)
    stream("after_deletes")

    tallies = {
        phase: world.meter.tally(label(phase))
        for phase in (
            "first_create",
            "create",
            "stream_account_after_creates",
            "stream_org_after_creates",
            "delete",
            "stream_account_after_deletes",
            "stream_org_after_deletes",
        )
    }
    resources = len(ids)
    per_create_stream, per_delete_stream, lifecycle = Tally(), Tally(), Tally()
    for phase in ("stream_account_after_creates", "stream_org_after_creates"):
        per_create_stream.add(tallies[phase])
    for phase in ("stream_account_after_deletes", "stream_org_after_deletes"):
        per_delete_stream.add(tallies[phase])
    for tally in tallies.values():
        lifecycle.add(tally)
    return {
        "first_create": tallies["first_create"].per(1),
        "create": tallies["create"].per(creates),
        "stream_account_per_create": tallies["stream_account_after_creates"].per(resources),
        "stream_org_per_create": tallies["stream_org_after_creates"].per(resources),
        "stream_per_create": per_create_stream.per(resources),
        "delete": tallies["delete"].per(resources),
        "stream_account_per_delete": tallies["stream_account_after_deletes"].per(resources),
        "stream_org_per_delete": tallies["stream_org_after_deletes"].per(resources),
        "stream_per_delete": per_delete_stream.per(resources),
        "lifecycle": lifecycle.per(resources),
        "refused_writes": {
            phase: tally.refused_writes for phase, tally in tallies.items() if tally.refused_writes
        },
    }


def _exact(service: ResourceService, account: str, org: str | None) -> bool:
    """After the lifecycle both counters hold nothing, at each level the account is counted at."""
    usage = service.usage(account)
    if not usage.best_effort == usage.eventual == 0:
        return False
    if org is None:
        return True
    states = service.org_counters(org)
    return all(state.best_effort == state.eventual == 1 for state in states.values())  # the first member's


# ---- org usage ---------------------------------------------------------------------------------
def usage(
    world: BenchWorld, sizes: tuple[int, ...] = USAGE_SIZES, top: int = TOP, split: int = SPLIT_USAGE
) -> dict[str, Any]:
    """The read at each size, not split; and at the largest, split over ``split`` shards, whose
    members spread over 4 S OrgUsageIndex keys (keys.org_usage_keys): one Query of each a kind."""
    organizations = [_usage_of(world, members, top) for members in sizes]
    if split > 1:
        organizations.append(_usage_of(world, max(sizes), top, shards=split))
    return {"top": top, "organizations": organizations}


def _usage_of(world: BenchWorld, members: int, top: int, *, shards: int = 1) -> dict[str, Any]:
    setup = world.service()
    plan_id, org = new_ids()
    setup.put_plan(plan_id, {world.settings.default_kind: 1_000_000})
    setup.put_org(org, plan_id, shards=shards if shards > 1 else None)
    accounts = seed.organization_members(
        world.clients.dynamodb,
        world.table,
        org,
        f"{org}-a",
        [held(n) for n in range(members)],
        usage_keys=org_usage_keys(shards),
    )
    service = world.service()  # a new process: the organization's plan not cached yet
    with world.meter.labeled(f"orgs:usage_{members}_s{shards}:cold") as cold:
        service.org_usage(org, top=top)
    with world.meter.labeled(f"orgs:usage_{members}_s{shards}:warm") as warm:
        found = service.org_usage(org, top=top)
    kind = found.kinds[world.settings.default_kind]
    total = sum(accounts.values())
    leaders = sorted(accounts.values(), reverse=True)[:top]
    return {
        "members": members,
        "shards": shards,
        "resources": total,
        "warm": _read_figures(warm),
        "cold": _read_figures(cold),
        "exact": (
            found.members == members
            and kind.best_effort == kind.eventual == total
            and [a.used for a in kind.top] == leaders
            and all(accounts.get(a.account_id) == a.used for a in kind.top)
        ),
    }


def _read_figures(tally: Tally) -> dict[str, Any]:
    return {
        "requests": sum(tally.requests.values()),
        "requests_by_operation": dict(sorted(tally.requests.items())),
        "read_units": tally.read_units,
    }
