"""The client's retries: 429/503 and connection errors, of safe requests only, within a deadline."""

from __future__ import annotations

import random
import re

import httpx
import pytest

from hybrid_counter_client import (
    HybridCounterError,
    LimitExceeded,
    RetryPolicy,
    ServiceUnavailable,
    TooManyRequests,
    Unauthorized,
)
from tests.unit.client_support import (
    ORG,
    ORG_USAGE,
    RESOURCE,
    USAGE,
    WOULD_ADMIT,
    FakeTime,
    Script,
    async_client,
    client,
    error,
    ok,
    run,
)

UNAVAILABLE_2S = error(503, "ServiceUnavailable", headers={"Retry-After": "2"})


# ---- Retry-After, jitter, backoff -----------------------------------------------------------------
@pytest.mark.parametrize("draw", [0.0, 0.5, 0.999])
def test_retry_after_2_is_waited_and_stretched_by_at_most_the_jitter(draw):
    time = FakeTime()
    script = Script(UNAVAILABLE_2S, UNAVAILABLE_2S, ok(USAGE))
    assert client(script, time, draw=draw).usage("acme").used == 3
    assert len(script.requests) == 3
    assert time.waits == pytest.approx([2 * (1 + 0.25 * draw)] * 2)
    assert all(2.0 <= wait < 2.5 for wait in time.waits)


def test_jitter_stays_within_its_bounds_and_does_spread_the_waits():
    policy = RetryPolicy(jitter=0.25, base_delay=0.2, max_delay=5.0)
    draws = random.Random(20)
    with_header = [policy.delay(1, 2.0, draws.random()) for _ in range(500)]
    assert all(2.0 <= wait < 2.5 for wait in with_header)
    assert max(with_header) - min(with_header) > 0.4  # spread over the range, not one value
    backoff = [policy.delay(3, None, draws.random()) for _ in range(500)]
    assert all(0.8 <= wait < 1.0 for wait in backoff)


def test_without_retry_after_the_waits_double_up_to_max_delay():
    time = FakeTime()
    throttled = error(429, "TooManyRequests")
    script = Script(throttled, throttled, throttled, throttled, ok(USAGE))
    policy = RetryPolicy(max_attempts=5, base_delay=0.2, max_delay=0.5)
    client(script, time, policy=policy).usage("acme")
    assert time.waits == pytest.approx([0.2, 0.4, 0.5, 0.5])


def test_the_deadline_ends_the_retries_before_a_wait_would_pass_it():
    time = FakeTime()
    start = time.now
    script = Script(then=UNAVAILABLE_2S)
    with pytest.raises(ServiceUnavailable) as raised:
        client(script, time, policy=RetryPolicy(max_attempts=100, deadline=5.0)).usage("acme")
    # Sent at 0 s, 2 s and 4 s; a third wait would end at 6 s, past the 5 s deadline.
    assert (len(script.requests), time.waits) == (3, [2.0, 2.0])
    assert time.now - start <= 5.0
    assert raised.value.retry_after == 2.0
    # Each attempt's timeout is cut to what is left of the deadline (10 s configured).
    timeouts = [r.extensions["timeout"]["read"] for r in script.requests]
    assert timeouts == pytest.approx([5.0, 3.0, 1.0])


def test_a_retry_after_longer_than_the_deadline_is_not_waited_for():
    time = FakeTime()
    script = Script(error(429, "TooManyRequests", headers={"Retry-After": "60"}))
    with pytest.raises(TooManyRequests):
        client(script, time, policy=RetryPolicy(deadline=30.0)).usage("acme")
    assert (len(script.requests), time.waits) == (1, [])


def test_max_attempts_counts_every_request_of_a_call():
    script = Script(then=error(503, "ServiceUnavailable", headers={"Retry-After": "0"}))
    with pytest.raises(ServiceUnavailable):
        client(script, policy=RetryPolicy(max_attempts=4)).get("acme", "r-1")
    assert len(script.requests) == 4


# ---- what is retried ------------------------------------------------------------------------------
SAFE_CALLS = [
    pytest.param(lambda c: c.usage("acme"), USAGE, 200, "GET", id="GET usage"),
    pytest.param(lambda c: c.get("acme", "r-1", kind="projects"), RESOURCE, 200, "GET", id="GET resource"),
    pytest.param(lambda c: c.put("acme", "r-1", "web"), RESOURCE, 201, "PUT", id="PUT"),
    pytest.param(lambda c: c.delete("acme", "r-1"), None, 204, "DELETE", id="DELETE"),
    pytest.param(lambda c: c.resize("acme", "r-1", 5, kind="volume_gb"), RESOURCE, 200, "PATCH", id="PATCH"),
    pytest.param(
        lambda c: c.set_override("acme", "projects", 3), {"account_id": "acme", "limit": 3}, 200, "PUT"
    ),
    # The organizations' calls: by id, to a target state (PUT, DELETE), or reads
    pytest.param(lambda c: c.put_org("g", "gold"), ORG, 201, "PUT", id="PUT org"),
    pytest.param(lambda c: c.get_org("g"), ORG, 200, "GET", id="GET org"),
    pytest.param(lambda c: c.delete_org("g"), None, 204, "DELETE", id="DELETE org"),
    pytest.param(
        lambda c: c.set_org_limit("g", "projects", 3),
        {"org_id": "g", "kind": "projects", "limit": 3},
        200,
        "PUT",
        id="PUT org limit",
    ),
    pytest.param(lambda c: c.remove_org_limit("g", "projects"), None, 204, "DELETE", id="DELETE org limit"),
    pytest.param(
        lambda c: c.add_member("g", "acme"),
        {"org_id": "g", "account_id": "acme"},
        201,
        "PUT",
        id="PUT member",
    ),
    pytest.param(lambda c: c.remove_member("g", "acme"), None, 204, "DELETE", id="DELETE member"),
    pytest.param(lambda c: c.org_usage("g"), ORG_USAGE, 200, "GET", id="GET org usage"),
    pytest.param(
        lambda c: list(c.org_history("g")),
        {"items": [], "next_token": None},
        200,
        "GET",
        id="GET org history",
    ),
    # A dry run writes nothing: sending it twice is as harmless as a GET.
    pytest.param(lambda c: c.would_create("acme", "web"), WOULD_ADMIT, 200, "POST", id="POST dry run"),
    pytest.param(
        lambda c: c.would_create("acme", "web", hold_seconds=60),
        WOULD_ADMIT,
        200,
        "POST",
        id="POST hold dry run",
    ),
    # A confirm is idempotent: confirming a confirmed hold answers the same resource.
    pytest.param(lambda c: c.confirm("acme", "r-1"), RESOURCE, 200, "POST", id="POST confirm"),
    pytest.param(
        lambda c: c.confirm("acme", "r-1", kind="projects"), RESOURCE, 200, "POST", id="POST confirm kind"
    ),
    # A PUT with a hold is still a PUT of an id.
    pytest.param(lambda c: c.put("acme", "r-1", "web", hold_seconds=60), RESOURCE, 201, "PUT", id="PUT hold"),
]


@pytest.mark.parametrize(("call", "answer", "status", "method"), SAFE_CALLS)
@pytest.mark.parametrize(
    "failure",
    [
        pytest.param(lambda: UNAVAILABLE_2S, id="503"),
        pytest.param(lambda: error(429, "TooManyRequests", headers={"Retry-After": "1"}), id="429"),
        pytest.param(lambda: httpx.ConnectError("refused"), id="connect-error"),
        pytest.param(lambda: httpx.ReadTimeout("slow"), id="read-timeout"),
        pytest.param(lambda: httpx.RemoteProtocolError("closed"), id="connection-dropped"),
    ],
)
def test_safe_requests_are_retried_after_429_503_and_connection_errors(call, answer, status, method, failure):
    time = FakeTime()
    script = Script(failure(), ok(answer, status))
    call(client(script, time))
    assert [m for m, _ in script.sent] == [method, method]
    assert script.sent[0] == script.sent[1]
    assert len(time.waits) == 1


@pytest.mark.parametrize(
    ("failure", "raised"),
    [
        pytest.param(UNAVAILABLE_2S, ServiceUnavailable, id="503"),
        pytest.param(error(429, "TooManyRequests", headers={"Retry-After": "1"}), TooManyRequests, id="429"),
        # The request may have arrived: the resource may or may not exist.
        pytest.param(httpx.ReadTimeout("slow"), httpx.ReadTimeout, id="read-timeout"),
        pytest.param(httpx.ConnectError("refused"), httpx.ConnectError, id="connect-error"),
    ],
)
def test_a_post_create_is_never_retried(failure, raised):
    time = FakeTime()
    script = Script(failure, then=ok(RESOURCE, 201))
    with pytest.raises(raised):
        client(script, time).create("acme", "web", kind="projects")
    assert script.sent == [("POST", "/accounts/acme/kinds/projects/resources")]
    assert time.waits == []


def test_a_post_hold_is_a_create_and_never_retried():
    time = FakeTime()
    script = Script(UNAVAILABLE_2S, then=ok(RESOURCE, 201))
    with pytest.raises(ServiceUnavailable):
        client(script, time).create("acme", "web", kind="projects", hold_seconds=60)
    assert script.sent == [("POST", "/accounts/acme/kinds/projects/resources")]
    assert time.waits == []


@pytest.mark.parametrize("status", [500, 502, 504, 409, 400, 404])
def test_other_statuses_are_the_answer_and_not_retried(status):
    script = Script(
        error(status, "LimitExceeded" if status == 409 else "X", limit=1, used=1), then=ok(RESOURCE)
    )
    with pytest.raises(HybridCounterError):
        client(script).put("acme", "r-1", "web")
    assert len(script.requests) == 1


def test_a_retry_safe_create_is_a_put_of_one_client_made_id_across_its_retries():
    time = FakeTime()
    script = Script(UNAVAILABLE_2S, httpx.ReadTimeout("lost"), ok(RESOURCE, 200))
    resource = client(script, time).create("acme", "web", kind="projects", units=2, retry_safe=True)
    methods, paths = zip(*script.sent, strict=True)
    assert methods == ("PUT", "PUT", "PUT")
    assert len(set(paths)) == 1
    assert re.fullmatch(r"/accounts/acme/kinds/projects/resources/[0-9a-f]{32}", paths[0])
    assert [script.body(i) for i in range(3)] == [{"name": "web", "units": 2}] * 3
    # The 200 answers the retry of an attempt that did create it: this call created it.
    assert resource.created is True
    # Another call makes another id.
    again = Script(ok(RESOURCE, 201))
    client(again).create("acme", "web", kind="projects", retry_safe=True)
    assert again.sent[0][1] != paths[0]


def test_a_plain_put_reports_whether_it_created():
    script = Script(ok(RESOURCE, 201), ok(RESOURCE, 200))
    api = client(script)
    assert api.put("acme", "r-1", "web").created is True
    assert api.put("acme", "r-1", "web").created is False


def test_limit_exceeded_is_not_retried_even_on_a_put():
    script = Script(error(409, "LimitExceeded", limit=2, used=2, kind="projects"), then=ok(RESOURCE))
    with pytest.raises(LimitExceeded):
        client(script).put("acme", "r-1", "web", kind="projects")
    assert len(script.requests) == 1


# ---- tokens -------------------------------------------------------------------------------------
class Provider:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        return f"token-{self.calls}"


def bearer(request: httpx.Request) -> str:
    return request.headers["authorization"]


UNAUTHORIZED = httpx.Response(401, json={"message": "Unauthorized"})


def test_the_token_is_asked_for_once_and_kept():
    provider = Provider()
    script = Script(ok(USAGE), ok(USAGE))
    api = client(script, auth=provider)
    api.usage("acme")
    api.usage("acme")
    assert provider.calls == 1
    assert [bearer(r) for r in script.requests] == ["Bearer token-1", "Bearer token-1"]


@pytest.mark.parametrize(
    "call",
    [
        pytest.param(lambda c: c.usage("acme"), id="GET"),
        # A 401 is API Gateway's, before the service runs: even a POST is safe to send again.
        pytest.param(lambda c: c.create("acme", "web"), id="POST"),
    ],
)
def test_a_401_asks_the_provider_again_once_and_sends_again(call):
    provider = Provider()
    time = FakeTime()
    script = Script(UNAUTHORIZED, then=lambda r: ok(USAGE) if r.method == "GET" else ok(RESOURCE, 201))
    call(client(script, time, auth=provider))
    assert provider.calls == 2
    assert [bearer(r) for r in script.requests] == ["Bearer token-1", "Bearer token-2"]
    assert time.waits == []


def test_a_second_401_is_raised_without_asking_again():
    provider = Provider()
    script = Script(UNAUTHORIZED, UNAUTHORIZED, then=ok(USAGE))
    with pytest.raises(Unauthorized) as raised:
        client(script, auth=provider).usage("acme")
    assert (provider.calls, len(script.requests)) == (2, 2)
    assert (raised.value.status, raised.value.code, raised.value.message) == (
        401,
        "Unauthorized",
        "Unauthorized",
    )


def test_a_401_for_a_token_another_request_already_replaced_does_not_ask_again():
    provider = Provider()
    api = client(Script(ok(USAGE)), auth=provider)
    api.usage("acme")  # token-1
    tokens = api._sender._tokens
    assert tokens is not None
    tokens.refresh("token-1")  # another request got its 401 and refreshed: token-2
    tokens.refresh("token-1")  # this one's 401 was for token-1 too: token-2 is kept
    assert (provider.calls, tokens.current()) == (2, "token-2")


# ---- asyncio: the same loop ---------------------------------------------------------------------
def test_async_client_honours_retry_after_and_never_retries_a_post():
    time = FakeTime()
    script = Script(UNAVAILABLE_2S, ok(USAGE), UNAVAILABLE_2S, then=ok(RESOURCE, 201))

    async def scenario():
        async with async_client(script, time) as api:
            usage = await api.usage("acme")
            with pytest.raises(ServiceUnavailable):
                await api.create("acme", "web")
            return usage

    assert run(scenario()).used == 3
    assert [m for m, _ in script.sent] == ["GET", "GET", "POST"]
    assert time.waits == [2.0]


def test_async_client_retries_a_confirm_like_a_put():
    time = FakeTime()
    script = Script(UNAVAILABLE_2S, httpx.ConnectError("refused"), then=ok(RESOURCE))

    async def scenario():
        async with async_client(script, time) as api:
            return await api.confirm("acme", "r-1", kind="projects")

    assert run(scenario()).held is False
    assert script.sent == [("POST", "/accounts/acme/kinds/projects/resources/r-1/confirm")] * 3
    assert len(time.waits) == 2


def test_async_client_retry_safe_create_and_async_token_provider():
    time = FakeTime()
    asked: list[int] = []

    async def provider() -> str:
        asked.append(1)
        return f"async-{len(asked)}"

    script = Script(UNAUTHORIZED, httpx.ConnectError("refused"), ok(RESOURCE, 201))

    async def scenario():
        async with async_client(script, time, auth=provider) as api:
            return await api.create("acme", "web", retry_safe=True)

    assert run(scenario()).created is True
    assert [bearer(r) for r in script.requests] == ["Bearer async-1", "Bearer async-2", "Bearer async-2"]
    assert {m for m, _ in script.sent} == {"PUT"}
    assert len({p for _, p in script.sent}) == 1
    assert len(time.waits) == 1


# ---- a delete whose first answer was lost -----------------------------------------------------------
def test_a_delete_retried_after_its_first_attempt_deleted_is_success_only_when_missing_ok():
    # Given a delete answered 503 (it did, or will, finish) and then 404 (it had finished)
    gone = error(404, "NotFound")
    strict = Script(UNAVAILABLE_2S, gone)
    # Then by default the 404 is the caller's to judge, and with missing_ok it is success
    with pytest.raises(HybridCounterError) as raised:
        client(strict, FakeTime()).delete("acme", "r1")
    assert raised.value.code == "NotFound"
    lenient = Script(UNAVAILABLE_2S, gone)
    client(lenient, FakeTime()).delete("acme", "r1", missing_ok=True)  # no NotFound raised
    assert [r.method for r in lenient.requests] == ["DELETE", "DELETE"]
    # and the async client agrees
    assert (
        run(async_client(Script(UNAVAILABLE_2S, gone), FakeTime()).delete("acme", "r1", missing_ok=True))
        is None
    )


def test_a_membership_retried_after_its_first_attempt_joined_reports_it_already_was():
    # Given an add whose first attempt joined but whose answer was lost (503), then 200
    script = Script(UNAVAILABLE_2S, ok({"org_id": "g", "account_id": "acme"}, 200))
    # Then the call succeeds, reporting that this (last) request found it a member
    membership = client(script, FakeTime()).add_member("g", "acme")
    assert (membership.org_id, membership.account_id, membership.joined) == ("g", "acme", False)
    assert [r.method for r in script.requests] == ["PUT", "PUT"]


def test_an_organization_delete_retried_after_it_deleted_is_success_only_when_missing_ok():
    gone = error(404, "NotFound")
    with pytest.raises(HybridCounterError) as raised:
        client(Script(UNAVAILABLE_2S, gone), FakeTime()).delete_org("g")
    assert raised.value.code == "NotFound"
    client(Script(UNAVAILABLE_2S, gone), FakeTime()).delete_org("g", missing_ok=True)  # no NotFound
    assert (
        run(async_client(Script(UNAVAILABLE_2S, gone), FakeTime()).delete_org("g", missing_ok=True)) is None
    )


def test_a_membership_conflict_is_the_answer_and_not_retried():
    script = Script(error(409, "AccountNotEmpty", "holds resources"))
    with pytest.raises(HybridCounterError) as raised:
        client(script, FakeTime()).remove_member("g", "acme")
    assert (raised.value.code, len(script.requests)) == ("AccountNotEmpty", 1)
