// The public API, called with the operator's token: the console can do only what the API allows.

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

export function apiClient(base, token) {
  return async function call(method, path, body) {
    const answer = await fetch(new URL(path.replace(/^\//, ""), base), {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await answer.text();
    let parsed = null;
    try {
      parsed = text ? JSON.parse(text) : null;
    } catch {
      parsed = null;
    }
    if (!answer.ok) {
      const error = (parsed && parsed.error) || {};
      const message = error.message || (parsed && parsed.message) || `HTTP ${answer.status}`;
      throw new ApiError(answer.status, error.code || String(answer.status), message);
    }
    return parsed;
  };
}

export const enc = encodeURIComponent;
