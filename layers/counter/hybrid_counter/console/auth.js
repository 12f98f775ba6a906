// Sign-in: OAuth 2.0 authorization code with PKCE (S256) at the deployment's identity provider,
// found through the issuer's discovery document. The access token is kept in sessionStorage
// (this tab only, gone when it closes) and sent as the API's bearer token.

const TOKEN_KEY = "hybrid-counter.console.token";
const PENDING_KEY = "hybrid-counter.console.pending";

function base64url(bytes) {
  let text = "";
  for (const byte of new Uint8Array(bytes)) text += String.fromCharCode(byte);
  return btoa(text).replaceAll("+", "-").replaceAll("/", "_").replace(/=+$/, "");
}

function randomText(size) {
  return base64url(crypto.getRandomValues(new Uint8Array(size)));
}

async function challengeOf(verifier) {
  return base64url(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(verifier)));
}

export async function loadConfig(base) {
  const answer = await fetch(new URL("console/config.json", base));
  if (!answer.ok) throw new Error(`console/config.json: HTTP ${answer.status}`);
  return answer.json();
}

async function discovery(issuer) {
  const url = `${issuer.replace(/\/$/, "")}/.well-known/openid-configuration`;
  const answer = await fetch(url);
  if (!answer.ok) throw new Error(`the issuer's discovery document: HTTP ${answer.status}`);
  return answer.json();
}

export function redirectUri() {
  return `${location.origin}${location.pathname}`;
}

export async function signIn(config) {
  if (!config.issuer) throw new Error("no identity provider: the console signs in with AuthMode=jwt (JwtIssuer)");
  const provider = await discovery(config.issuer);
  const verifier = randomText(48);
  const state = randomText(16);
  sessionStorage.setItem(PENDING_KEY, JSON.stringify({ verifier, state, redirect: redirectUri() }));
  const request = new URL(provider.authorization_endpoint);
  request.search = new URLSearchParams({
    response_type: "code",
    client_id: config.client_id,
    redirect_uri: redirectUri(),
    scope: config.scope,
    state,
    code_challenge: await challengeOf(verifier),
    code_challenge_method: "S256",
  }).toString();
  location.assign(request.toString());
}

// Back from the provider with ?code=...&state=...: redeem the code, then drop it from the URL.
export async function completeSignIn(config, params) {
  const pending = JSON.parse(sessionStorage.getItem(PENDING_KEY) || "null");
  sessionStorage.removeItem(PENDING_KEY);
  history.replaceState(null, "", redirectUri() + location.hash);
  if (params.get("error")) throw new Error(`sign-in refused: ${params.get("error")} ${params.get("error_description") || ""}`);
  if (!pending || pending.state !== params.get("state")) throw new Error("sign-in answer without a matching request (state)");
  const provider = await discovery(config.issuer);
  const answer = await fetch(provider.token_endpoint, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({
      grant_type: "authorization_code",
      code: params.get("code"),
      redirect_uri: pending.redirect,
      client_id: config.client_id,
      code_verifier: pending.verifier,
    }),
  });
  const body = await answer.json();
  if (!answer.ok) throw new Error(`the token endpoint refused: ${body.error_description || body.error}`);
  const expiresAt = Date.now() + 1000 * (Number(body.expires_in) || 3600);
  sessionStorage.setItem(TOKEN_KEY, JSON.stringify({ token: body.access_token, expiresAt }));
}

export function currentToken() {
  const kept = JSON.parse(sessionStorage.getItem(TOKEN_KEY) || "null");
  return kept && kept.expiresAt > Date.now() + 5000 ? kept.token : null;
}

export function signOut() {
  sessionStorage.removeItem(TOKEN_KEY);
}

// For display only (who is signed in): the API, not the page, checks the token.
export function claimsOf(token) {
  try {
    const part = token.split(".")[1].replaceAll("-", "+").replaceAll("_", "/");
    return JSON.parse(atob(part));
  } catch {
    return {};
  }
}
