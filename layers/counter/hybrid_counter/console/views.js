// The console's views. Each renders into `view` and returns a function that stops it (timers).
import { ApiError, enc } from "./api.js";
import { h, table, usageMeter } from "./dom.js";

const WATCH_SECONDS = 5;
// The accounts and plans this tab has opened (the last 20 of each): whose changes the recent
// events view reads, so its cost per refresh stays bounded whatever the number of accounts.
const WATCHED = { account: "hybrid-counter.console.accounts", plan: "hybrid-counter.console.plans" };

function watched(what) {
  return JSON.parse(sessionStorage.getItem(WATCHED[what]) || "[]");
}

function watch(what, id) {
  const ids = [id, ...watched(what).filter((known) => known !== id)].slice(0, 20);
  sessionStorage.setItem(WATCHED[what], JSON.stringify(ids));
}

const accountLink = (id) => h("a", { href: `#/account/${enc(id)}` }, id);

// --- accounts near their limits (GET /usage/over) ------------------------------------------------

export async function nearLimitView(view, call, notify) {
  const threshold = h("input", { type: "number", id: "threshold", min: "1", max: "1000", placeholder: "lowest" });
  const kind = h("input", { id: "near-kind", placeholder: "kind (optional)" });
  const results = h("div", { id: "near-results" });
  const rowsOf = (items) =>
    items.map((item) =>
      h(
        "tr",
        { "data-account": item.account_id || "", "data-org": item.org_id || "" },
        h("td", {}, item.account_id ? accountLink(item.account_id) : `organization ${item.org_id}`),
        h("td", {}, item.kind),
        h("td", {}, usageMeter(item.used, item.limit), ` ${item.used} / ${item.limit}`),
        h("td", {}, `${item.threshold} %`),
        h("td", {}, item.since || ""),
      ),
    );
  // One page at a time, newest crossing first; "More" reads the next (next_token).
  async function load(after = null) {
    const query = new URLSearchParams();
    if (threshold.value.trim()) query.set("threshold", threshold.value.trim());
    if (kind.value.trim()) query.set("kind", kind.value.trim());
    if (after) query.set("next_token", after);
    let page;
    try {
      page = await call("GET", `/usage/over?${query}`);
    } catch (error) {
      if (!(error instanceof ApiError && error.status === 404)) throw error;
      results.replaceChildren(
        h("p", { id: "near-unavailable", className: "error" }, "This API has no GET /usage/over: open an account by its id above."),
      );
      return;
    }
    const next = page.next_token ?? page.next ?? null;
    const more = next ? h("button", { type: "button", id: "near-more", onclick: () => load(next).catch((e) => notify(e.message, true)) }, "More") : null;
    if (after && results.querySelector("#near-table tbody")) {
      results.querySelector("#near-table tbody").append(...rowsOf(page.items));
      results.querySelector("#near-more")?.remove();
      if (more) results.append(more);
      return;
    }
    results.replaceChildren(
      page.items.length
        ? table(["Account", "Kind", "Use", "Threshold", "Since"], rowsOf(page.items), { id: "near-table" })
        : h("p", { id: "near-empty" }, "No account or organization is at or above this threshold."),
      ...(more ? [more] : []),
    );
  }
  view.append(
    h("h2", {}, "Accounts near their limits"),
    h("form", { onsubmit: (event) => { event.preventDefault(); load().catch((e) => notify(e.message, true)); } },
      h("label", {}, "At or above ", threshold, " % of the limit (a configured threshold) "), kind, " ", h("button", { type: "submit", id: "near-show" }, "Show")),
    results,
  );
  await load();
  return () => {};
}

// --- one account: use per kind, plan, overrides, history, events ---------------------------------

function describeChange(item) {
  const subject = item.kind ? `${item.what} ${item.kind}` : item.what;
  const value = (v) => (v === null || v === undefined ? "none" : typeof v === "object" ? JSON.stringify(v) : String(v));
  return `${subject}: ${value(item.old)} → ${value(item.new)}${item.force ? " (forced)" : ""}`;
}

// Every limit change is published as a "Quota Limit Changed" event whose detail is the change
// record and whose event_id is its change id: the history is where the console reads them.
function changeEvents(items) {
  return items.map((item) =>
    h("li", { "data-event-id": item.change_id }, h("strong", {}, "Quota Limit Changed"), ` ${item.at} `,
      h("code", {}, item.change_id), ` ${item.account_id ? `account ${item.account_id}` : `plan ${item.plan_id}`}: ${describeChange(item)} by ${item.by}`),
  );
}

function historyRows(items) {
  return items.map((item) =>
    h("tr", { "data-change": item.change_id }, h("td", {}, item.at), h("td", {}, item.by), h("td", {}, item.what),
      h("td", {}, item.kind || ""), h("td", {}, describeChange(item))),
  );
}

export async function accountView(view, call, accountId, notify) {
  watch("account", accountId);
  const path = `/accounts/${enc(accountId)}`;
  async function render() {
    const [usage, history] = await Promise.all([
      call("GET", `${path}/limits`),
      call("GET", `${path}/limits/history?limit=20`),
    ]);
    watch("plan", usage.plan_id);
    let plan = null;
    try {
      plan = await call("GET", `/plans/${enc(usage.plan_id)}`);
    } catch (error) {
      if (!(error instanceof ApiError && error.status === 404)) throw error;
    }
    const rows = Object.entries(usage.kinds).map(([kind, figures]) => kindRow(kind, figures, plan));
    view.replaceChildren(
      h("h2", { id: "account-title" }, `Account ${usage.account_id}`),
      h("p", {}, "Plan ", h("a", { href: "#/plans", id: "account-plan" }, usage.plan_id),
        plan ? ` (${Object.entries(plan.limits).map(([k, v]) => `${k} ${v}`).join(", ") || "no limits"})` : " (not stored: the stack's defaults)",
        usage.org_id ? ` · organization ${usage.org_id}` : ""),
      table(["Kind", "Use", "Used / limit", "Limit from", "Override"], rows, { id: "kinds" }),
      h("h3", {}, "History"),
      history.items.length
        ? table(["When", "By", "What", "Kind", "Change"], historyRows(history.items), { id: "history" })
        : h("p", { id: "history-empty" }, "No limit changes yet."),
      h("h3", {}, "Events"),
      h("p", { className: "muted" }, "Quota Limit Changed events of this account (each limit change publishes one; event id = change id)."),
      h("ul", { id: "events" }, changeEvents(history.items)),
    );
  }

  function kindRow(kind, figures, plan) {
    const input = h("input", { type: "number", min: "0", id: `limit-${kind}`, value: String(figures.limit), "aria-label": `new limit for ${kind}` });
    const refusal = h("div", { id: `refusal-${kind}` });
    async function change(force) {
      refusal.replaceChildren();
      try {
        await call("PUT", `${path}/limits/${enc(kind)}`, { limit: Number(input.value), force });
        notify(`${kind}: override set to ${input.value}${force ? " (forced)" : ""}`);
        await render();
      } catch (error) {
        if (!(error instanceof ApiError && error.code === "LimitBelowUsage")) throw error;
        refusal.replaceChildren(
          h("div", { className: "refusal" }, h("strong", {}, "LimitBelowUsage: "), error.message, " ",
            h("button", { type: "button", id: `force-${kind}`, className: "danger", onclick: () => change(true).catch((e) => notify(e.message, true)) },
              `Force: set ${input.value} below current use`)),
        );
      }
    }
    async function remove(force) {
      try {
        await call("DELETE", `${path}/limits/${enc(kind)}${force ? "?force=true" : ""}`);
        notify(`${kind}: override removed`);
        await render();
      } catch (error) {
        if (!(error instanceof ApiError && error.code === "LimitBelowUsage")) throw error;
        refusal.replaceChildren(h("div", { className: "refusal" }, h("strong", {}, "LimitBelowUsage: "), error.message, " ",
          h("button", { type: "button", className: "danger", onclick: () => remove(true).catch((e) => notify(e.message, true)) }, "Force: remove anyway")));
      }
    }
    const planLimit = plan && kind in plan.limits ? ` (plan: ${plan.limits[kind]})` : "";
    return h("tr", { "data-kind": kind },
      h("td", {}, kind),
      h("td", {}, usageMeter(figures.used, figures.limit, `usage-${kind}`)),
      h("td", { id: `figures-${kind}` }, `${figures.used} / ${figures.limit}`),
      h("td", { id: `source-${kind}` }, `${figures.limit_source}${planLimit}`),
      h("td", {},
        input, " ",
        h("button", { type: "button", id: `set-${kind}`, onclick: () => change(false).catch((e) => notify(e.message, true)) }, "Set override"),
        figures.limit_source === "override"
          ? h("button", { type: "button", id: `remove-${kind}`, onclick: () => remove(false).catch((e) => notify(e.message, true)) }, "Remove override")
          : null,
        refusal),
    );
  }

  await render();
  return () => {};
}

// --- plans ---------------------------------------------------------------------------------------

export async function plansView(view, call, notify) {
  async function render() {
    const plans = [];
    let next = null;
    do {
      const page = await call("GET", `/plans?limit=100${next ? `&next_token=${enc(next)}` : ""}`);
      plans.push(...page.items);
      next = page.next_token;
    } while (next && plans.length < 1000);
    view.replaceChildren(
      h("h2", {}, "Plans"),
      h("p", { className: "muted" }, "A plan's limits, one kind=limit per line; saving replaces them all and applies to every account on the plan."),
      table(["Plan", "Limits", ""], [...plans.map(planRow), planRow({ plan_id: "", limits: {} })], { id: "plans" }),
    );
  }

  function planRow(plan) {
    const id = h("input", { value: plan.plan_id, placeholder: "new plan id", readOnly: Boolean(plan.plan_id), "aria-label": "plan id" });
    const limits = h("textarea", { rows: "3", cols: "30", "aria-label": `limits of ${plan.plan_id || "a new plan"}` },
      Object.entries(plan.limits).map(([kind, limit]) => `${kind}=${limit}`).join("\n"));
    async function save() {
      const parsed = {};
      for (const line of limits.value.split("\n").map((l) => l.trim()).filter(Boolean)) {
        const [kind, limit] = line.split("=").map((part) => part.trim());
        if (!kind || !/^[0-9]+$/.test(limit || "")) throw new Error(`not kind=limit: ${line}`);
        parsed[kind] = Number(limit);
      }
      await call("PUT", `/plans/${enc(id.value.trim())}`, { limits: parsed });
      watch("plan", id.value.trim());
      notify(`plan ${id.value.trim()} saved`);
      await render();
    }
    return h("tr", { "data-plan": plan.plan_id }, h("td", {}, id), h("td", {}, limits),
      h("td", {}, h("button", { type: "button", onclick: () => save().catch((e) => notify(e.message, true)) }, plan.plan_id ? "Save" : "Create")));
  }

  await render();
  return () => {};
}

// --- recent events -------------------------------------------------------------------------------

// What the console can see of the events without a store of its own: the limit changes (each
// published as "Quota Limit Changed") in the history of the accounts and plans opened in this tab,
// and who is at or over a threshold now (GET /usage/over: "Quota Threshold Reached", since when).
// Refreshed every WATCH_SECONDS while the view is open.
export async function eventsView(view, call, notify) {
  const list = h("ul", { id: "recent-events" });
  const stamp = h("p", { className: "muted", id: "events-refreshed" });
  view.append(
    h("h2", {}, "Recent events"),
    h("p", { className: "muted" }, `Limit changes of the accounts and plans opened in this tab, and who is at or over a threshold; refreshed every ${WATCH_SECONDS} s.`),
    stamp,
    list,
  );
  let timer = null;
  let stopped = false;

  async function collect() {
    const histories = await Promise.all([
      ...watched("plan").map((id) => call("GET", `/plans/${enc(id)}/history?limit=10`)),
      ...watched("account").map((id) => call("GET", `/accounts/${enc(id)}/limits/history?limit=10`)),
    ]);
    const changes = histories.flatMap((page) => page.items).map((item) => ({ at: item.at, node: changeEvents([item])[0] }));
    let thresholds = [];
    try {
      const over = await call("GET", "/usage/over"); // from the lowest configured threshold
      thresholds = over.items.map((item) => ({
        at: item.since || "",
        node: h("li", {}, h("strong", {}, "Quota Threshold Reached"), ` ${item.since || ""} ${item.account_id ? `account ${item.account_id}` : `organization ${item.org_id}`} ${item.kind}: ${item.used} / ${item.limit} (≥ ${item.threshold} %)`),
      }));
    } catch (error) {
      if (!(error instanceof ApiError && error.status === 404)) throw error;
    }
    return [...changes, ...thresholds].sort((a, b) => (a.at < b.at ? 1 : -1)).slice(0, 50);
  }

  async function refresh() {
    try {
      const events = await collect();
      if (stopped) return;
      list.replaceChildren(...events.map((event) => event.node));
      stamp.textContent = `Refreshed ${new Date().toISOString()}`;
    } catch (error) {
      notify(error.message, true);
    }
    if (!stopped) timer = setTimeout(refresh, WATCH_SECONDS * 1000);
  }
  await refresh();
  return () => {
    stopped = true;
    clearTimeout(timer);
  };
}
