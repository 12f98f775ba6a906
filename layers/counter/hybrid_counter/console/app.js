// The console's entry point: sign-in, then one view per location hash.
import { claimsOf, completeSignIn, currentToken, loadConfig, signIn, signOut } from "./auth.js";
import { apiClient, ApiError } from "./api.js";
import { accountView, eventsView, nearLimitView, plansView } from "./views.js";

const base = new URL(".", location.href); // the API's base URL: the console is its /console
const $ = (id) => document.getElementById(id);
let stopView = () => {};

function notify(message, isError = false) {
  $("notice").textContent = message;
  $("notice").className = isError ? "error" : "";
}

async function show() {
  stopView();
  stopView = () => {};
  const token = currentToken();
  if (!token) return;
  const call = apiClient(base, token);
  const [, name = "near", ...rest] = location.hash.split("/");
  const view = $("view");
  view.replaceChildren();
  notify("");
  try {
    if (name === "account" && rest[0]) stopView = await accountView(view, call, decodeURIComponent(rest[0]), notify);
    else if (name === "plans") stopView = await plansView(view, call, notify);
    else if (name === "events") stopView = await eventsView(view, call, notify);
    else stopView = await nearLimitView(view, call, notify);
  } catch (error) {
    if (error instanceof ApiError && error.status === 401) {
      signOut();
      location.reload();
      return;
    }
    notify(error.message, true);
  }
}

async function start() {
  const config = await loadConfig(base);
  const params = new URLSearchParams(location.search);
  if (params.has("code") || params.has("error")) await completeSignIn(config, params);
  $("sign-in").addEventListener("click", () => signIn(config).catch((error) => notify(error.message, true)));
  $("sign-out").addEventListener("click", () => {
    signOut();
    location.reload();
  });
  const token = currentToken();
  if (!token) return;
  const claims = claimsOf(token);
  $("who").textContent = `${claims.sub || "?"} (${claims.scope || "no scope"})`;
  $("sign-out").hidden = false;
  $("nav").hidden = false;
  $("open-account").addEventListener("submit", (event) => {
    event.preventDefault();
    location.hash = `#/account/${encodeURIComponent($("open-account-id").value.trim())}`;
  });
  window.addEventListener("hashchange", show);
  await show();
}

start().catch((error) => notify(error.message, true));
