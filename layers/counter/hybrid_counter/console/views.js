// The console's views. Each renders into `view` and returns a function that stops it (timers).
import { ApiError, enc } from "./api.js";
import { h, table, usageMeter } from "./dom.js";

const WATCH_SECONDS = 5;
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
      h("code", {}, item.change_id), ` ${item.account_id ? `account ${item.account_id}` : item.org_id ? `organization ${item.org_id}` : `plan ${item.plan_id}`}: ${describeChange(item)} by ${item.by}`),
  );
}

function historyRows(items) {
  return items.map((item) =>
    h("tr", { "data-change": item.change_id }, h("td", {}, item.at), h("td", {}, item.by), h("td", {}, item.what),
      h("td", {}, item.kind || ""), h("td", {}, describeChange(item))),
  );
}

export async function accountView(view, call, accountId, notify) {
  const path = `/accounts/${enc(accountId)}`;
  async function render() {
    const [usage, history] = await Promise.all([
      call("GET", `${path}/limits`),
      call("GET", `${path}/limits/history?limit=20`),
    ]);
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
      notify(`plan ${id.value.trim()} saved`);
      await render();
    }
    return h("tr", { "data-plan": plan.plan_id }, h("td", {}, id), h("td", {}, limits),
      h("td", {}, h("button", { type: "button", onclick: () => save().catch((e) => notify(e.message, true)) }, plan.plan_id ? "Save" : "Create")));
  }

  await render();
  return () => {};
}

// --- recent events (GET /events) ----------------------------------------------------------------

// One published event as a list item: a limit change reads as in an account's history (its detail
// is the change record), a threshold crossing as who, which kind, how much of the limit.
function eventItem(event) {
  const detail = event.detail || {};
  if (event.detail_type === "Quota Limit Changed") {
    const [item] = changeEvents([{ ...detail, change_id: detail.change_id || event.event_id }]);
    item.dataset.detailType = event.detail_type;
    item.dataset.published = event.time;
    return item;
  }
  const who = detail.account_id ? ["account ", accountLink(detail.account_id)] : [`organization ${detail.org_id}`];
  return h(
    "li",
    { "data-event-id": event.event_id, "data-detail-type": event.detail_type, "data-account": detail.account_id || "", "data-org": detail.org_id || "", "data-published": event.time },
    h("strong", {}, event.detail_type),
    ` ${event.time} `,
    h("code", {}, event.event_id),
    " ",
    ...who,
    ` ${detail.kind}: ${detail.used} / ${detail.limit} (${detail.threshold} %)`,
  );
}

// The events published recently, every account's and organization's, newest first, from the API's
// event log (GET /events: threshold reached and cleared, limit changed). The first page is read
// again every WATCH_SECONDS while the view is open and what is new goes on top; "More" reads the
// next older page (next_token).
export async function eventsView(view, call, notify) {
  const list = h("ul", { id: "recent-events" });
  const stamp = h("p", { className: "muted", id: "events-refreshed" });
  const footer = h("div", { id: "events-footer" });
  view.append(
    h("h2", {}, "Recent events"),
    h("p", { className: "muted" }, `Every event published in the last 24 hours, newest first; refreshed every ${WATCH_SECONDS} s.`),
    stamp,
    list,
    footer,
  );
  const shown = new Set();
  let older = null; // next_token of the oldest page shown
  let timer = null;
  let stopped = false;

  function offerMore() {
    footer.replaceChildren(older ? h("button", { type: "button", id: "events-more", onclick: () => more().catch((e) => notify(e.message, true)) }, "More") : "");
  }

  async function more() {
    const page = await call("GET", `/events?limit=50&next_token=${enc(older)}`);
    if (stopped) return;
    list.append(...page.items.filter((event) => !shown.has(event.event_id)).map((event) => (shown.add(event.event_id), eventItem(event))));
    older = page.next_token || null;
    offerMore();
  }

  async function refresh() {
    try {
      const page = await call("GET", "/events?limit=50");
      if (stopped) return;
      const fresh = page.items.filter((event) => !shown.has(event.event_id));
      if (shown.size === 0 || fresh.length === page.items.length) {
        // the first read, or more new events than a page: start again from the newest page
        shown.clear();
        list.replaceChildren();
        older = page.next_token || null;
        offerMore();
      }
      list.prepend(...fresh.map((event) => (shown.add(event.event_id), eventItem(event))));
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
