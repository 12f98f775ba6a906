"""Review 34 (hostile): a stream count that met a resize in flight, made by the record of the write
that ends the resize (counting/records.py): exactly once, at the final size, against the sweeper,
records delivered twice and a second resize. Against DynamoDB Local.
"""

from __future__ import annotations

import pytest

from hybrid_counter.counting.stream_batch import process_stream_batch
from tests.explorer.scheduler import Race
from tests.integration.test_resize_settlement import SEATS, World, is_counter_move, without_backoff, world
from tests.integration.test_split_review import stop_before

pytestmark = pytest.mark.integration
__all__ = ["without_backoff", "world"]


@pytest.mark.parametrize(("origin", "target", "then"), [(2, 5, 3), (5, 2, 4), (2, 5, None)])
def test_a_count_left_by_a_resize_is_made_once_whoever_comes_first(
    world: World, account: str, origin: int, target: int, then: int | None
) -> None:
    # Given a resource not counted yet whose PATCH made its claim, and the stream path's count
    # of its create meeting the claim (left to the sweeper)
    world.service.set_limit(account, 10, kind=SEATS)
    world.service.create(account, "a", {}, "team", kind=SEATS, units=origin)
    created = world.stream.records_for(account)
    with Race(world.clients.dynamodb, world.clients.dynamodb_single_attempt) as race:
        resize = race.start("resize", lambda: world.service.resize(account, "team", target, kind=SEATS))
        stop_before(race, resize, is_counter_move)
        counted = race.run("count", lambda: process_stream_batch(created, world.counter))
        assert counted.error is None, counted.error
        race.finish(resize)
    assert resize.error is None, resize.error
    # When the sweeper runs past the grace period before the stream path sees the resize end,
    # a second PATCH (or none) follows, and every later record is delivered twice
    world.pass_the_grace_period()
    world.sweeper.sweep()
    if then is not None:
        world.service.resize(account, "team", then, kind=SEATS)
    records = world.stream.records_for(account)
    for _ in range(2):
        outcome = process_stream_batch(records, world.counter)
        assert outcome.failed_sequence_numbers == [], outcome.error
    world.quiesce(account)
    # Then it is counted once, at the size it holds
    size = then if then is not None else target
    assert world.counters(account) == (size, size)
    assert world.visible_units(account) == size
