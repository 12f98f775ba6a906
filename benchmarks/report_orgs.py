"""The report's sections and targets for organizations (results.json: ``orgs``; orgs.py and
org_ceiling.py). Shaping only: every figure comes from the run."""

from __future__ import annotations

from typing import Any

Row = dict[str, Any]
WRITES = ("PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems")

COST_ROWS = (
    ("first_create", "the kind's first create"),
    ("create", "create, steady state"),
    ("stream_account_per_create", "stream path per create: the account's partition"),
    ("stream_org_per_create", "stream path per create: the organization's partition"),
    ("delete", "delete"),
    ("stream_account_per_delete", "stream path per delete: the account's partition"),
    ("stream_org_per_delete", "stream path per delete: the organization's partition"),
    ("lifecycle", "lifecycle (all of the above, per resource)"),
)

# What each extra call of a member is for (resources/create.py, delete.py, org_level.py and the
# stream path), by phase and operation; an extra the run shows that is not here is reported as
# unexplained.
WHY = {
    ("create", "Query"): "the organization's counter items of the kind (one item, or its S "
    "shards), read in one Query before anything is written (its limit pre-check, as the "
    "account's own counter item is read)",
    ("create", "UpdateItem"): "the organization's admission: one conditional single-item write, "
    "before the account's",
    ("first_create", "Query"): "as a steady create, the organization's pre-check",
    ("first_create", "UpdateItem"): "as a steady create, the organization's admission",
    ("delete", "UpdateItem"): "the organization's release, after the account's",
    ("stream_org_per_create", "TransactWriteItems"): "the organization's counting transaction, one "
    "a batch of its partition: its counter item (2 units) and each resource's org_counted mark "
    "(2 units each, transactional)",
    ("stream_org_per_delete", "DeleteItem"): "the removal of the member's claim once its "
    "organization's release applied (its account's came first), made from the organization's "
    "partition, whose batch cannot see the delete remove the item on the account's partition: "
    "by then the item is usually gone, so the write is refused by its condition and still charged",
}


def targets(results: dict[str, Any]) -> list[Row]:
    orgs = results.get("orgs")
    if not orgs:
        return []
    rows: list[Row] = []

    def judge(name: str, value: Any, goal: str, met: bool | None, note: str = "") -> None:
        rows.append({"target": name, "value": value, "goal": goal, "met": met, "note": note})

    cost = orgs.get("cost")
    if cost:
        extra = cost["extra"]["create"]
        writes = sum(n for op, n in extra["requests_by_operation"].items() if op in WRITES)
        transactions = [
            cost["member"][phase]["requests_by_operation"].get("TransactWriteItems", 0)
            for phase in ("first_create", "create", "delete")
        ]
        judge(
            "a member's create vs an account in no organization: extra calls on the API path",
            _calls(extra["requests_by_operation"]) + f"; {sum(transactions):g} transactions",
            "one more conditional write, no transaction",
            writes == 1 and extra["requests_by_operation"].get("UpdateItem") == 1 and not any(transactions),
            f"{extra['read_units']:+g} read units (the organization's pre-check) and "
            f"{extra['total_write_units']:+g} write units a create; a delete "
            f"{_calls(cost['extra']['delete']['requests_by_operation'])}, "
            f"{cost['extra']['delete']['total_write_units']:+g} write units",
        )
    usage = orgs.get("usage")
    if usage:
        rows_ = [r for r in usage["organizations"] if r.get("shards", 1) == 1]
        requests = [r["warm"]["requests"] for r in rows_]
        units = [r["warm"]["read_units"] for r in rows_]
        judge(
            "org usage read: requests at " + " / ".join(f"{r['members']:,}" for r in rows_) + " members",
            " / ".join(str(n) for n in requests)
            + " requests, "
            + " / ".join(f"{u:g}" for u in units)
            + " RU",
            "the same at every size (no read per account)",
            len(set(requests)) == 1 and len(set(units)) == 1 and all(r["exact"] for r in rows_),
            "answers exact: " + " / ".join(str(r["exact"]) for r in rows_),
        )
    ceiling = orgs.get("ceiling")
    if ceiling:
        for shards, ladder in ceiling["by_shards"].items():
            name = f"an organization's sustained admissions / model, S = {shards} (simulator)"
            exact = ladder["exact_after"]["exact"] and ladder["exact_limit_under_throttling"]["exact"]
            machine = ladder["machine_check"]["kept_up"]
            judge(
                name,
                ladder["ratio"],
                ">= 0.90, exact",
                ladder["ratio"] >= 0.9 and exact and machine,
                f"{ladder['sustained_per_second']:g}/s against {ladder['model_per_second']:g}/s, "
                f"{ceiling['accounts']} accounts; exact after: {ladder['exact_after']['exact']}, "
                f"limit under throttling: {ladder['exact_limit_under_throttling']['exact']}; the machine "
                f"alone {'kept up' if machine else 'did NOT keep up'} at the top rung",
            )
    return rows


def markdown(results: dict[str, Any]) -> list[str]:
    orgs = results.get("orgs")
    if not orgs:
        return []
    lines: list[str] = []
    if orgs.get("cost"):
        lines += _cost(orgs["cost"])
    if orgs.get("usage"):
        lines += _usage(orgs["usage"])
    if orgs.get("ceiling"):
        lines += _ceiling(orgs["ceiling"])
    return lines


def _figures(row: dict[str, Any]) -> str:
    return f"{row['requests']:g} / {row['read_units']:g} / {row['total_write_units']:g} ({row['index_write_units']:g})"


def _calls(by_operation: dict[str, float]) -> str:
    return ", ".join(f"{op} {n:+g}" for op, n in by_operation.items()) or "none"


def why(phase: str, by_operation: dict[str, float]) -> list[str]:
    """One line per extra operation of a phase: what it is for (as the code says), or that the
    run shows an extra nobody explained."""
    return [
        f"{op} {n:+g}: {WHY.get((phase, op), 'not explained (unexpected: look at this run)')}"
        for op, n in by_operation.items()
    ]


def _cost(cost: dict[str, Any]) -> list[str]:
    n = cost["creates"]
    lines = [
        f"## Organizations: what membership costs ({n + 1} creates then deletes per account)",
        "",
        "Two accounts with the same override (no plan read): one in no organization, one a member of "
        "an organization on a stored plan, whose plan the service has cached (another member's create "
        "came first). Requests / read units / write units (index write units, included), per create "
        "or per delete; the stream path's figures are each partition's batches, delivered after all "
        "the creates (then all the deletes).",
        "",
        "| | not in an organization | member | member's extra | member's extra calls |",
        "|---|---|---|---|---|",
    ]
    for phase, label in COST_ROWS:
        plain, member, extra = cost["not_member"][phase], cost["member"][phase], cost["extra"][phase]
        lines.append(
            f"| {label} | {_figures(plain)} | {_figures(member)} | "
            f"{extra['requests']:+g} / {extra['read_units']:+g} / {extra['total_write_units']:+g} | "
            f"{_calls(extra['requests_by_operation'])} |"
        )
    transactions = sum(
        cost["member"][phase]["requests_by_operation"].get("TransactWriteItems", 0)
        for phase in ("first_create", "create", "delete")
    )
    first = cost["first_create_extra"]
    moved = cost["member"]["stream_account_per_create"]["transaction_index_write_units"]
    refused = cost["member"]["refused_writes"].get("stream_org_after_deletes", 0)
    lines += [
        "",
        f"No transaction on the API path: {transactions:g} TransactWriteItems in the member's creates "
        "and deletes. Each extra call of a member, steady state:",
        "",
        *[f"- create: {line}" for line in why("create", cost["extra"]["create"]["requests_by_operation"])],
        *[f"- delete: {line}" for line in why("delete", cost["extra"]["delete"]["requests_by_operation"])],
        f"- delete: {cost['extra']['delete']['index_write_units']:+g} index write units: the account's "
        "release takes the resource out of its eventual, OrgUsageIndex's sort key, so the counter "
        "item's index entry moves (removed and written again)",
        *[
            f"- stream path per create: {line}"
            for line in why(
                "stream_org_per_create", cost["extra"]["stream_org_per_create"]["requests_by_operation"]
            )
        ],
        f"- stream path per create: the account's counting transaction moves its counter item on "
        f"OrgUsageIndex too: {moved:g} index write units a create as DynamoDB Local reports them "
        "(not in the totals, which count a transaction's items by rule)",
        *[
            f"- stream path per delete: {line} ({refused} of {n + 1} refused)"
            for line in why(
                "stream_org_per_delete", cost["extra"]["stream_org_per_delete"]["requests_by_operation"]
            )
        ],
        "",
        "A kind's first create on an account, beyond its steady state (the kind registered on the "
        "account's profile: a read of the profile, as the new counter item does not say which "
        "organization the account is in, and a write of it): not in an organization "
        f"{_calls(first['not_member']['requests_by_operation'])} ({first['not_member']['read_units']:+g} read, "
        f"{first['not_member']['total_write_units']:+g} write units); member "
        f"{_calls(first['member']['requests_by_operation'])} ({first['member']['read_units']:+g} read, "
        f"{first['member']['total_write_units']:+g} write units). An organization's first create in a "
        f"process, beyond that: {_calls(cost['first_of_org_extra']['requests_by_operation'])} "
        f"({cost['first_of_org_extra']['read_units']:+g} read units: its profile for its plan, and the "
        "plan, cached for PlanCacheSeconds). Both counters back to zero at both levels after the "
        f"deletes: {cost['exact']}.",
        "",
    ]
    return lines


def _usage(usage: dict[str, Any]) -> list[str]:
    lines = [
        f"## Organization usage: the read of an organization of many accounts (top {usage['top']})",
        "",
        "| members | S (split over) | resources | requests | read units | a new process: requests | read units | answer exact |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in usage["organizations"]:
        warm, cold = row["warm"], row["cold"]
        lines.append(
            f"| {row['members']:,} | {row.get('shards', 1)} | {row['resources']:,} | {warm['requests']} "
            f"({', '.join(f'{op} {n}' for op, n in warm['requests_by_operation'].items())}) | "
            f"{warm['read_units']:g} | {cold['requests']} "
            f"({', '.join(f'{op} {n}' for op, n in cold['requests_by_operation'].items())}) | "
            f"{cold['read_units']:g} | {row['exact']} |"
        )
    lines += [
        "",
        "Member accounts seeded through the table as the API and the stream path leave them (each "
        "with 1 to 10 live, counted resources). The read is the organization's profile (GetItem), "
        "its counter items (one Query) and, per kind, one Query of the sparse OrgUsageIndex for "
        "the top accounts' keys; a new process also reads the organization's plan (its profile "
        "again, then the plan). An organization split over S spreads its members over 4 S keys "
        "of the index (each count or release of a member moves its entry: two index writes, on "
        "one key a partition's 1,000 writes a second), so its read makes one Query of each, "
        "the same at any number of members. Exact: the member count, both counters and the top "
        "accounts' use as seeded.",
        "",
    ]
    return lines


def _ceiling(ceiling: dict[str, Any]) -> list[str]:
    lines = [
        f"## An organization's ceiling (simulator: {ceiling['units_per_second']:g} write units/s per "
        f"item and partition; {ceiling['accounts']} member accounts loading one organization)",
        "",
        "| S (counter items) | sustained /s | model /s (S x one item) | sustained / model | capacity alone /s "
        "| hottest item's share | API requests throttled | after: best_effort / eventual / units live "
        "| limit under throttling: admitted / live | machine alone, top rung |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    ran = []
    for shards, ladder in ceiling["by_shards"].items():
        ran.append((shards, ladder))
        after, limit, machine = (
            ladder["exact_after"],
            ladder["exact_limit_under_throttling"],
            ladder["machine_check"],
        )
        lines.append(
            f"| {shards} | {ladder['sustained_per_second']:g} | {ladder['model_per_second']:g} | "
            f"{ladder['ratio']:g} | {ladder['capacity_model_per_second']:g} | {ladder['hottest_item_share']:g} | "
            f"{ladder['throttled_requests']} | {after['best_effort']} / {after['eventual']} / "
            f"{after['units_live']} ({'exact' if after['exact'] else 'NOT exact'}) | "
            f"{limit['admitted']} / {limit['units_live']} of a limit of {limit['limit']} "
            f"({limit['creates']} creates) | {machine['offered_per_second']:g}/s: "
            f"{'kept up' if machine['kept_up'] else 'behind'} |"
        )
    lines.append("")
    for shards, ladder in ran:
        sizes = ladder["actions_per_counting_transaction"]
        lines += [
            f"S = {shards}: steps of {ladder['step_seconds']:g} s, back to back, creates round robin over "
            f"the accounts (a step keeps up when >= 98 % are admitted and the creates the "
            f"organization's eventual does not count yet average under two windows of admissions; "
            f"one that falls behind is run once more). Counting transactions held "
            f"{sizes['organization']:g} actions on the organization's partition, {sizes['members']:g} "
            f"on the members'.",
            "",
            "| offered /s | admitted | uncounted creates | kept up |",
            "|---|---|---|---|",
            *[
                f"| {s['offered_per_second']} | {s['admitted_fraction']} | {s['uncounted_creates']} | "
                f"{'yes' if s['kept_up'] else 'no'} |"
                for s in ladder["steps"]
            ],
            "",
        ]
    lines += [
        "The model: the organization's counter item is the one hot item (the accounts' items and "
        "partitions each take a share); it pays a unit per create and 2 per counting transaction "
        "of its partition, whose batches hold one record per create: the single-account model of "
        "the ceiling section with the organization's stream. Split over S items, S times one "
        "item's rate, each item on a bucket of its own. After the ladder the stream path caught "
        "up and the organization's counters were compared with the units live in its accounts; "
        "then a burst three times an organization limit, over 10 accounts, each create retried "
        "until admitted or refused.",
        "",
    ]
    return lines
