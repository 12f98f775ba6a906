"""Healing the best-effort counter and the operator's recount, including under concurrent traffic."""

from __future__ import annotations

import contextlib
import json
import threading
import time

import pytest

from hybrid_counter.counting.recount import Recounter
from hybrid_counter.counting.stream_batch import process_stream_batch
from hybrid_counter.effects import Effects, Waiter
from hybrid_counter.errors import InProgress, LimitExceeded, NotFound
from hybrid_counter.healing import Healer
from hybrid_counter.keys import counter_key, range_of
from hybrid_counter.ops import cli
from hybrid_counter.resources import ResourceService
from tests.explorer.scheduler import Race

pytestmark = pytest.mark.integration


@pytest.fixture
def healer(settings, clients):
    return Healer(settings.table_name, clients)


def make_recounter(settings, clients, counter, healer, service, **kwargs):
    return Recounter(
        settings.table_name,
        service.counters,
        counter,
        healer,
        clients,
        service=service,
        grace_seconds=settings.pending_grace_seconds,
        **kwargs,
    )


@pytest.fixture
def recounter(settings, clients, counter, healer, service):
    return make_recounter(settings, clients, counter, healer, service)


def ids_in_range(prefix: str, range_id: str, count: int) -> list[str]:
    found: list[str] = []
    n = 0
    while len(found) < count:
        if range_of(f"{prefix}{n}") == range_id:
            found.append(f"{prefix}{n}")
        n += 1
    return found


def counts_of(service, account, live_count):
    usage = service.usage(account)
    return usage.best_effort, usage.eventual, live_count(account)


def test_heal_raises_a_drifted_best_effort_to_eventual(service, account, drain, healer, set_counter):
    # Given three counted resources and a best-effort counter that lost two of them
    for n in range(3):
        service.create(account, f"r{n}", {})
    drain(account)
    set_counter(account, best_effort=1)
    # When the healer runs
    outcome = healer.heal_account(account)
    # Then best-effort is back to the truth
    assert outcome.healed
    assert service.usage(account).best_effort == 3


def test_the_stream_path_heals_the_drift_it_sees(service, account, drain, set_counter):
    # Given a drifted best-effort counter
    for n in range(3):
        service.create(account, f"r{n}", {})
    drain(account)
    set_counter(account, best_effort=0)
    # When anything writes the counter item and the stream delivers it
    service.create(account, "another", {})
    drain(account)
    # Then the stream path saw best_effort < eventual in the counter's new image and healed it
    assert service.usage(account).best_effort == 4


def test_heal_is_safe_while_a_delete_is_between_its_claim_and_its_release(
    service, settings, clients, account, drain, healer, set_counter, live_count
):
    # Given three counted resources, best-effort drifted to 0, and a delete stopped after its claim
    ids = [service.create(account, f"r{n}", {}, resource_id=f"r{n}")[0].resource_id for n in range(3)]
    drain(account)
    set_counter(account, best_effort=0)
    with Race(clients.dynamodb, clients.dynamodb_single_attempt) as race:
        delete = race.start("DELETE r0", lambda: service.delete(account, ids[0]))
        race.until(delete, "UpdateItem")  # claimed: still holding its slot
        # When the healer runs now
        assert healer.heal_account(account).healed
        # Then it counted the claimed resource, which is right until its release lands
        assert service.usage(account).best_effort == 3
        race.finish(delete)
    assert delete.error is None
    # And after the release, best-effort matches what is left
    assert (service.usage(account).best_effort, live_count(account)) == (2, 2)


def test_heal_all_pages_every_account_and_goes_on_from_a_continuation(
    service, new_account, drain, healer, set_counter
):
    accounts = [new_account() for _ in range(3)]
    for account in accounts:
        service.create(account, "a", {})
        drain(account)
        set_counter(account, best_effort=0)
    pages = iter([False, True])  # stop after the first page of CounterIndex
    first = healer.heal_all(until=lambda: next(pages, True))
    rest = healer.heal_all(first.continuation) if first.continuation else first
    healed = {o.account_id for o in first.healed + rest.healed}
    assert set(accounts) <= healed
    assert all(service.usage(a).best_effort == 1 for a in accounts)


def test_a_heal_asked_for_by_a_stale_record_never_lowers_best_effort(
    service, account, stream, counter, drain, healer, set_counter, live_count
):
    # Given three counted resources of a limit of 5, best_effort drifted to 0 (the stream holds
    # the counter image that shows the drift), healed since by an operator
    service.set_limit(account, 5)
    for n in range(3):
        service.create(account, f"r{n}", {}, resource_id=f"r{n}")
    drain(account)
    set_counter(account, best_effort=0)
    drift_seen = stream.records_for(account)
    assert healer.heal_account(account).healed
    # and two more creates admitted, not yet counted by the stream path (best_effort 5, eventual 3)
    for n in range(3, 5):
        service.create(account, f"r{n}", {}, resource_id=f"r{n}")
    # When the stream path gets to the old record that showed the drift, and heals as it asks
    process_stream_batch(drift_seen, counter)
    # Then the heal did not apply (best_effort is not below eventual now): best_effort still
    # counts the five resources, and the account is at its limit
    assert service.usage(account).best_effort == 5
    with pytest.raises(LimitExceeded):
        service.create(account, "a sixth", {})
    drain(account)
    assert counts_of(service, account, live_count) == (5, 5, 5)


def test_heal_under_concurrent_traffic_never_overcounts(service, account, drain, healer, live_count):
    # Given two clients creating and deleting, and best-effort made to drift low now and then
    service.set_limit(account, 1000)
    created: list[str] = []

    def traffic(worker: int) -> None:
        for n in range(30):
            created.append(service.create(account, f"t{worker}-{n}", {})[0].resource_id)
            if n % 3 == 2:
                with contextlib.suppress(NotFound, InProgress, IndexError):
                    service.delete(account, created.pop(0))

    threads = [threading.Thread(target=traffic, args=(w,)) for w in range(2)]
    for thread in threads:
        thread.start()
    # When the stream counts and the healer heals while they run
    while any(thread.is_alive() for thread in threads):
        drain(account, settle=False)
        healer.heal_account(account)
        # Then best-effort never counts more than the resources there are (two creates may be
        # between their admission and becoming visible)
        assert service.usage(account).best_effort <= live_count(account) + 2
    for thread in threads:
        thread.join()
    drain(account)
    usage = service.usage(account)
    assert usage.best_effort == usage.eventual == live_count(account)


def test_recount_dry_run_reports_drift_and_fix_repairs_it(service, account, drain, recounter, set_counter):
    # Given 5 counted resources and an eventual counter corrupted to 7
    for n in range(5):
        service.create(account, f"r{n}", {})
    drain(account)
    set_counter(account, eventual=7)
    # When an operator recounts without --fix
    report = recounter.recount(account, fix=False).to_json()
    # Then the drift is reported and nothing changes
    assert (report["eventual_drift"], report["live_resources"], report["eventual"]) == (2, 5, 7)
    assert service.usage(account).eventual == 7
    # And with --fix the counter is repaired exactly
    fixed = recounter.recount(account, fix=True).to_json()
    assert (fixed["eventual"], fixed["best_effort"]) == (5, 5)
    assert recounter.recount(account, fix=False).to_json()["eventual_drift"] == 0


def test_recount_lowers_an_overcounting_best_effort(service, account, drain, recounter, set_counter):
    for n in range(4):
        service.create(account, f"r{n}", {})
    drain(account)
    set_counter(account, best_effort=9)
    report = recounter.recount(account, fix=True).to_json()
    assert report["best_effort"] == 4
    assert report["best_effort_excess"] == 5
    service.create(account, "fits again", {})


def test_recount_under_counting_in_the_same_range_never_writes_a_stale_correction(
    service, settings, clients, counter, healer, account, stream, set_counter
):
    # Given drift in range 0 and an uncounted resource of range 0 (its admission not delivered)
    counted = ids_in_range("c", "0", 3)
    for rid in counted:
        service.create(account, rid, {}, resource_id=rid)
    process_stream_batch(stream.records_for(account), counter)
    set_counter(account, eventual=5)  # two too many, in range 0
    (late,) = ids_in_range("late", "0", 1)
    service.create(account, late, {}, resource_id=late)
    pending_admission = stream.records_for(account)
    recounter = make_recounter(settings, clients, counter, healer, service, sleep=lambda _: None)
    with Race(clients.dynamodb, clients.dynamodb_single_attempt) as race:
        recount = race.start("recount", lambda: recounter.recount(account, fix=True))
        # When the recount has taken range 0's census and is about to write its correction,
        while race.next_call(recount) != "UpdateItem":
            race.step(recount)
        # and the stream counts the late resource (same range) in between
        process_stream_batch(pending_admission, counter)
        race.finish(recount)
    # Then the correction computed before the count is refused, and the range recounted
    assert recount.error is None
    assert service.usage(account).eventual == 4


def test_two_recounts_at_once_fix_a_drift_once(
    service, settings, clients, counter, healer, account, drain, set_counter, live_count
):
    # Given three counted resources and an eventual counter two too high (in range 0)
    for n in range(3):
        service.create(account, f"r{n}", {}, resource_id=f"r{n}")
    drain(account)
    set_counter(account, eventual=5)
    first, second = (
        make_recounter(settings, clients, counter, healer, service, sleep=lambda _: None) for _ in range(2)
    )
    with Race(clients.dynamodb, clients.dynamodb_single_attempt) as race:
        recount = race.start("recount (1)", lambda: first.recount(account, fix=True))
        # When one recount has taken range 0's census and is about to write its correction,
        while race.next_call(recount) != "UpdateItem":
            race.step(recount)
        # and another recount runs whole in between (it fixes the same drift)
        second.recount(account, fix=True)
        race.finish(recount)
    # Then the first one's correction, computed before the second's, was refused: the drift was
    # taken out once
    assert recount.error is None
    assert counts_of(service, account, live_count) == (3, 3, 3)


def corrupt_totals(settings, clients, account, **totals: int) -> None:
    """Set totals without their range shares (what only corruption or a bug can do)."""
    clients.dynamodb.update_item(
        TableName=settings.table_name,
        Key=counter_key(account),
        UpdateExpression="SET " + ", ".join(f"#{name} = :{name}" for name in totals),
        ExpressionAttributeNames={f"#{name}": name for name in totals},
        ExpressionAttributeValues={f":{name}": {"N": str(value)} for name, value in totals.items()},
    )


def test_recount_never_fixes_the_totals_with_a_correction_computed_before_a_heal(
    service, settings, clients, healer, recounter, account, drain, live_count
):
    # Given three counted resources, and totals parted from their shares: best_effort 1 and
    # eventual 4, while the shares of each still sum to 3
    for n in range(3):
        service.create(account, f"r{n}", {}, resource_id=f"r{n}")
    drain(account)
    corrupt_totals(settings, clients, account, best_effort=1, eventual=4)
    with Race(clients.dynamodb, clients.dynamodb_single_attempt) as race:
        recount = race.start("recount", lambda: recounter.recount(account, fix=True))
        # When the recount has read the totals and is about to write its fix of them,
        while race.next_call(recount) != "UpdateItem":
            race.step(recount)
        # and a heal lands in between (best_effort := eventual, each range's share with it)
        assert healer.heal_account(account).healed
        race.finish(recount)
    # Then the fix computed before the heal was refused and computed again: both totals are the
    # resources there are
    assert recount.error is None
    assert counts_of(service, account, live_count) == (3, 3, 3)


def test_recount_whose_fix_of_the_totals_a_heal_made_unnecessary_goes_on(
    service, settings, clients, healer, recounter, account, drain, live_count
):
    # Given three counted resources, and best_effort's total parted from its shares (1, shares 3)
    for n in range(3):
        service.create(account, f"r{n}", {}, resource_id=f"r{n}")
    drain(account)
    corrupt_totals(settings, clients, account, best_effort=1)
    with Race(clients.dynamodb, clients.dynamodb_single_attempt) as race:
        recount = race.start("recount", lambda: recounter.recount(account, fix=True))
        # When a heal lands between the recount's read of the totals and its fix of them (the heal
        # makes best_effort's total and shares those of eventual, which agree: nothing is left to fix)
        while race.next_call(recount) != "UpdateItem":
            race.step(recount)
        assert healer.heal_account(account).healed
        race.finish(recount)
    # Then the recount sees there is nothing left to fix and goes on
    assert recount.error is None, repr(recount.error)
    assert counts_of(service, account, live_count) == (3, 3, 3)


def test_recount_converges_under_steady_creates_and_deletes(
    service, settings, clients, counter, healer, account, drain, set_counter, live_count
):
    # Given 300 resources and an eventual counter three too high
    service.set_limit(account, 10_000)
    for n in range(300):
        service.create(account, f"base{n}", {}, resource_id=f"base{n}")
    drain(account)
    set_counter(account, eventual=303)
    stop = threading.Event()

    def traffic(worker: int) -> None:
        n = 0
        while not stop.is_set():
            rid = f"w{worker}-{n}"
            service.create(account, "churn", {}, resource_id=rid)
            drain(account, settle=False)
            if n % 2:
                service.delete(account, rid)
            n += 1

    threads = [threading.Thread(target=traffic, args=(w,)) for w in range(2)]
    for thread in threads:
        thread.start()
    try:
        # When the recount runs while creates, deletes and stream counting go on
        recounter = make_recounter(settings, clients, counter, healer, service, attempts=50)
        report = recounter.recount(account, fix=True).to_json()
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    # Then every range settled, the drift was fixed, and it stays right after the traffic
    assert report["ranges_unsettled"] == []
    assert report["eventual_drift"] == 3
    drain(account)
    usage = service.usage(account)
    assert usage.eventual == usage.best_effort == live_count(account)


def test_recount_finishes_a_delete_stuck_past_the_grace_period(
    settings, clients, counter, healer, service, account, drain, live_count
):
    # Given a delete that died between its claim and its release
    for rid in ("a", "b"):
        service.create(account, rid, {}, resource_id=rid)
    drain(account)
    with Race(clients.dynamodb, clients.dynamodb_single_attempt) as race:
        delete = race.start("DELETE a", lambda: service.delete(account, "a"))
        race.until(delete, "UpdateItem")
        race.step(delete, fault="crash")
    # When the grace period has passed and an operator recounts with --fix
    later = time.time() + settings.pending_grace_seconds + 1
    late = ResourceService(settings, clients, effects=Effects(clock=lambda: later, waiter=Waiter(attempts=1)))
    report = make_recounter(settings, clients, counter, healer, late, clock=lambda: later).recount(
        account, fix=True
    )
    # Then the delete was finished, its slot released once
    assert any("finished the delete of a" in action for action in report.actions)
    with pytest.raises(NotFound):
        service.get(account, "a")
    usage = service.usage(account)
    assert (usage.best_effort, usage.eventual, live_count(account)) == (1, 1, 1)


def test_recount_goes_on_from_its_continuation(service, account, drain, recounter, set_counter):
    for n in range(20):
        service.create(account, f"r{n}", {})
    drain(account)
    set_counter(account, eventual=25)
    ranges_done = iter(range(100))
    first = recounter.recount(account, fix=True, until=lambda: next(ranges_done) >= 4)
    assert first.continuation is not None
    assert len(first.ranges) == 4
    rest = recounter.recount(account, fix=True, continuation=first.continuation)
    assert rest.continuation is None
    assert len(first.ranges) + len(rest.ranges) == 16
    assert service.usage(account).eventual == 20


@pytest.mark.parametrize(
    "argv",
    [
        ["sweep", "--older-than", "0"],
        ["recount", "some-account", "--fix", "--finish-pending-older-than", "0"],
    ],
)
def test_ops_commands_refuse_a_grace_shorter_than_the_stacks_unless_forced(
    stack, settings, argv, capsys, monkeypatch
):
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", stack.dynamodb_url)
    where = ["--table", settings.table_name]
    with pytest.raises(SystemExit) as refused:
        cli.main([*where, *argv])
    assert "PendingGraceSeconds" in str(refused.value)
    assert cli.main([*where, *argv, "--force"]) == 0
    json.loads(capsys.readouterr().out)


def test_counting_an_in_flight_create_early_with_force_counts_it_once(
    settings, clients, counter, healer, service, account, stream, live_count
):
    # Given a PUT stopped after making its resource live, before the stream counted it
    service.set_limit(account, 1)
    with Race(clients.dynamodb, clients.dynamodb_single_attempt) as race:
        put = race.start("PUT x", lambda: service.create(account, "x", {}, resource_id="x"))
        # after its put, its admission and the write that makes it live (a kind's first create
        # registers the kind on the account's profile before it puts anything)
        race.until(put, "PutItem")
        race.until(put, "UpdateItem", count=2)
        # When an operator forces a recount that counts pending work of any age, and heals
        make_recounter(settings, clients, counter, healer, service).recount(
            account, fix=True, finish_older_than=0
        )
        race.finish(put)
    process_stream_batch(stream.records_for(account), counter)
    # Then it is counted once by each counter, and the account is exactly at its limit
    usage = service.usage(account)
    assert (usage.best_effort, usage.eventual, live_count(account)) == (1, 1, 1)
    with pytest.raises(LimitExceeded):
        service.create(account, "over", {})
