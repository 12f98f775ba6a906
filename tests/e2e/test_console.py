"""The operator console in a real browser: Debian's Chromium, driven by Playwright (no download).

An operator signs in at the local issuer (authorization code with PKCE: the page redirects to
its form, the code comes back and is redeemed), opens an account at 80 % of its plan's limit,
tries an override below its use (the API's LimitBelowUsage is shown and nothing changes),
raises it, and sees the change in the account's history and as its "Quota Limit Changed" event,
in the account and in the recent events (the API's event log, with the account's "Quota Threshold
Reached"); then forces a limit below use, deliberately, and edits
a plan. Every check waits for an element, never for a fixed time. With HC_CONSOLE_SCREENSHOTS set
to a folder, the test saves its screenshots there (docs/screenshots/console-*.png come from it).

Only against the embedded runtime: the sign-in form is the local issuer's.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, ConsoleMessage, Page, Route, expect, sync_playwright

from localrun import LocalRuntime
from tests.e2e.conftest import Target

pytestmark = pytest.mark.e2e

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
# for each element: a loaded machine runs the suite beside this browser (10 s once ran out on the
# account page after a near-limit row's link, in a clean-clone make test on 2026-11-26; it
# passed 3 of 3 alone): the wait only bounds how long a failure takes, never what passes
WAIT_MS = 20_000
expect.set_options(timeout=WAIT_MS)
SCREENSHOTS = os.environ.get("HC_CONSOLE_SCREENSHOTS")


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: `make deps` installs Debian's chromium package")
    with sync_playwright() as playwright:
        # Playwright gives the browser a new empty profile of its own (its --user-data-dir)
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=FLAGS)
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1280, "height": 860})
    context.set_default_timeout(WAIT_MS)
    opened = context.new_page()
    violations: list[str] = []

    def note(message: ConsoleMessage) -> None:
        if "Content Security Policy" in message.text:
            violations.append(message.text)

    opened.on("console", note)
    opened.on("pageerror", lambda error: violations.append(f"page error: {error}"))
    yield opened
    context.close()
    # The page ran under its own policy without breaking it (no inline script or style)
    assert violations == []


def shot(page: Page, name: str) -> None:
    if SCREENSHOTS:
        Path(SCREENSHOTS).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(SCREENSHOTS) / f"console-{name}.png"), full_page=True)


def sign_in(page: Page, api_url: str, user: str) -> None:
    page.goto(f"{api_url}/console")
    page.click("#sign-in")
    # The local issuer's form: any user name signs in (locally only), with the scope asked for
    page.wait_for_url("**/authorize?**")
    expect(page.locator("body")).to_contain_text("hybrid-counter/operator")
    shot(page, "sign-in")
    page.fill("#username", user)
    page.click("#sign-in")
    expect(page.locator("#who")).to_contain_text(f"{user} (hybrid-counter/operator)")
    # The code is gone from the address bar once redeemed
    assert "code=" not in page.url


def account_at_80_percent(target: Target, kind: str = "projects") -> tuple[str, str]:
    """An account on a plan of 5 of the kind, with 4 of them."""
    plan, account = f"console-{uuid.uuid4().hex[:10]}", f"console-{uuid.uuid4().hex[:10]}"
    assert target.call("PUT", f"/plans/{plan}", {"limits": {kind: 5}}).status_code == 200
    assert target.call("PUT", f"/accounts/{account}/plan", {"plan_id": plan}).status_code == 200
    for n in range(4):
        made = target.call("POST", f"/accounts/{account}/kinds/{kind}/resources", {"name": f"p{n}"})
        assert made.status_code == 201, made.text
    return plan, account


def limits_of(target: Target, account: str) -> dict[str, object]:
    response = target.call("GET", f"/accounts/{account}/limits")
    assert response.status_code == 200
    kinds: dict[str, object] = response.json()["kinds"]["projects"]
    return kinds


def test_the_console_is_served_with_a_strict_content_security_policy(
    local_runtime: LocalRuntime, target: Target
) -> None:
    for path in ("/console", "/console/app.js", "/console/console.css", "/console/config.json"):
        response = target.http.get(f"{target.api_url}{path}", timeout=10)
        assert response.status_code == 200, path
        policy = response.headers["Content-Security-Policy"]
        assert "default-src 'self'" in policy
        assert "script-src 'self'" in policy
        assert "'unsafe-inline'" not in policy
        assert "frame-ancestors 'none'" in policy
        # connect-src: the API (this origin) and the issuer, nothing else
        assert f"connect-src 'self' {local_runtime.issuer.url};" in policy
    config = target.http.get(f"{target.api_url}/console/config.json", timeout=10).json()
    assert config == {
        "issuer": local_runtime.issuer.url,
        "client_id": "hybrid-counter-console",
        "scope": "hybrid-counter/operator",
    }
    assert target.http.get(f"{target.api_url}/console/nothing.js", timeout=10).status_code == 404


def test_an_operator_raises_an_override_and_sees_the_history_entry_and_the_event(
    local_runtime: LocalRuntime, target: Target, page: Page
) -> None:
    plan, account = account_at_80_percent(target)
    sign_in(page, target.api_url, "ops-alice")

    # When the operator opens the account: its use per kind as a bar, its plan
    page.fill("#open-account-id", account)
    page.click("#open-account button")
    expect(page.locator("#account-title")).to_have_text(f"Account {account}")
    expect(page.locator("#account-plan")).to_have_text(plan)
    meter = page.locator("#usage-projects")
    expect(meter).to_have_attribute("value", "4")
    expect(meter).to_have_attribute("max", "5")
    expect(page.locator("#source-projects")).to_have_text("plan (plan: 5)")
    # (its history so far: the move onto the plan)
    expect(page.locator("#history tbody tr")).to_have_count(1)
    expect(page.locator("#history tbody tr")).to_contain_text(f"account_plan: default → {plan}")

    # When an override below its use is tried: the API's LimitBelowUsage is shown, nothing changes
    page.fill("#limit-projects", "3")
    page.click("#set-projects")
    expect(page.locator("#refusal-projects")).to_contain_text("LimitBelowUsage")
    expect(page.locator("#refusal-projects")).to_contain_text("projects: limit 3 < 4 in use")
    expect(page.locator("#force-projects")).to_be_visible()
    expect(page.locator("#force-projects")).to_have_class("danger")
    shot(page, "limit-below-usage")
    assert (limits_of(target, account)["limit"], limits_of(target, account)["limit_source"]) == (5, "plan")

    # When the operator raises it instead
    page.fill("#limit-projects", "10")
    page.click("#set-projects")
    # Then the bar, the source, the history entry and the event show it
    expect(page.locator("#figures-projects")).to_have_text("4 / 10")
    expect(page.locator("#source-projects")).to_have_text("override (plan: 5)")
    change = target.call("GET", f"/accounts/{account}/limits/history").json()["items"][0]  # newest
    assert (change["what"], change["old"], change["new"], change["by"]) == ("override", None, 10, "ops-alice")
    entry = page.locator(f"#history tr[data-change='{change['change_id']}']")
    expect(entry).to_contain_text("override projects: none → 10")
    expect(entry).to_contain_text("ops-alice")
    event = page.locator(f"#events li[data-event-id='{change['change_id']}']")
    expect(event).to_contain_text("Quota Limit Changed")
    expect(page.locator("#refusal-projects")).to_be_empty()
    shot(page, "account")

    # When the operator deliberately forces a limit below use
    page.fill("#limit-projects", "2")
    page.click("#set-projects")
    page.click("#force-projects")
    expect(page.locator("#figures-projects")).to_have_text("4 / 2")
    expect(page.locator("#history tbody tr").first).to_contain_text("override projects: 10 → 2 (forced)")
    assert limits_of(target, account)["limit"] == 2

    # And the recent events, watched, list the changes of the account and of its plan
    page.goto(f"{target.api_url}/console#/events")
    expect(page.locator(f"#recent-events li[data-event-id='{change['change_id']}']")).to_contain_text(
        f"account {account}"
    )
    expect(page.locator("#recent-events")).to_contain_text(
        f'plan {plan}: plan_limits: none → {{"projects":5}}'
    )
    # And the crossing its creates made (4 of the plan's 5), and the one the forced limit made (4
    # of 2), from the API's event log (newest first: the order depends on when each was
    # published, so each is found by its text). (Whether 80 % is also cleared at 10 and reached
    # again at 2 depends on how the stream batches the two changes' records with the changes' own
    # judgements: a state that moved on is judged as it is then, thresholds.py; so the 80 % event
    # is found by its use and limit, not as the only one of its threshold.)
    reached = f"#recent-events li[data-detail-type='Quota Threshold Reached'][data-account='{account}']"
    expect(page.locator(reached, has_text="projects: 4 / 5 (80 %)")).to_have_count(1)
    expect(page.locator(f"{reached}[data-event-id*='/100/reached']")).to_contain_text(
        "projects: 4 / 2 (100 %)"
    )
    shot(page, "events")

    # When the operator edits the plan: every account on it gets the new limit
    page.goto(f"{target.api_url}/console#/plans")
    limits = page.locator(f"#plans tr[data-plan='{plan}'] textarea")
    expect(limits).to_have_value("projects=5")
    limits.fill("projects=6\nseats=3")
    page.click(f"#plans tr[data-plan='{plan}'] button")
    expect(page.locator("#notice")).to_have_text(f"plan {plan} saved")
    expect(page.locator(f"#plans tr[data-plan='{plan}'] textarea")).to_have_value("projects=6\nseats=3")
    shot(page, "plans")
    assert target.call("GET", f"/plans/{plan}").json()["limits"] == {"projects": 6, "seats": 3}


def test_the_console_lists_the_accounts_near_their_limits(
    local_runtime: LocalRuntime, target: Target, page: Page
) -> None:
    # (a kind of its own: the list holds this account only, whatever else the suite made)
    kind = f"near-{uuid.uuid4().hex[:8]}"
    probe = target.call("GET", f"/usage/over?threshold=80&kind={kind}")
    assert probe.status_code == 200, probe.text
    _, account = account_at_80_percent(target, kind)
    target.settle()
    sign_in(page, target.api_url, "ops-bob")
    page.fill("#near-kind", kind)
    page.click("#near-show")
    row = page.locator(f"#near-table tr[data-account='{account}']")
    expect(row).to_contain_text(kind)
    shot(page, "near-limit")
    row.locator("a").click()
    expect(page.locator("#account-title")).to_have_text(f"Account {account}")


def test_more_reads_the_next_page_of_the_accounts_near_their_limits(
    local_runtime: LocalRuntime, target: Target, page: Page
) -> None:
    # Given two accounts at 80 % of a kind of their own, and the API's pages cut to one row (the
    # console's request, with limit=1 added on its way)
    kind = f"near-{uuid.uuid4().hex[:8]}"
    accounts = {account_at_80_percent(target, kind)[1] for _ in range(2)}
    target.settle()

    def one_a_page(route: Route) -> None:
        route.continue_(url=f"{route.request.url}&limit=1")

    page.route("**/usage/over?*", one_a_page)
    sign_in(page, target.api_url, "ops-bob")
    page.fill("#near-kind", kind)
    # When the operator shows the list: one row and More
    page.click("#near-show")
    rows = page.locator("#near-table tbody tr")
    expect(rows).to_have_count(1)
    # Then More adds the next page's row under it, and goes once there is no next page
    page.click("#near-more")
    expect(rows).to_have_count(2)
    expect(page.locator("#near-more")).to_have_count(0)
    shown = {rows.nth(n).get_attribute("data-account") for n in range(2)}
    assert shown == accounts


def test_a_token_without_the_operator_scope_gets_the_api_s_refusal(
    local_runtime: LocalRuntime, target: Target, page: Page
) -> None:
    # Given the console holding a tenant's token (signed by the issuer, no operator scope)
    _, account = account_at_80_percent(target)
    tenant = local_runtime.issuer.mint({"account_id": account, "sub": f"tenant-{account}"})
    page.goto(f"{target.api_url}/console")
    page.evaluate(
        "token => sessionStorage.setItem('hybrid-counter.console.token',"
        " JSON.stringify({token, expiresAt: Date.now() + 600000}))",
        tenant,
    )
    # When it opens the tenant's own account (a new load: the first one found no token)
    page.goto(f"{target.api_url}/console#/account/{account}")
    page.reload()
    # Then the API refuses (the operators' read of limits needs the scope), and the page says so
    expect(page.locator("#notice")).to_have_text("Forbidden")
    expect(page.locator("#kinds")).to_have_count(0)
    assert limits_of(target, account)["limit"] == 5
