import assert from "node:assert/strict";
import { password as defaultPassword } from "./fixtures.ts";

/**
 * A browser's HTTP side without a browser: cookies kept, redirects not followed, the CSRF token of
 * the last page seen sent with every form. For the web tests that run on every database.
 */
export class WebClient {
  readonly #url: string;
  readonly #cookies = new Map<string, string>();
  #csrf = "";

  constructor(url: string) {
    this.#url = url;
  }

  async request(method: string, path: string, form?: Record<string, string | string[]>) {
    const headers: Record<string, string> = {};
    this.#sendCookies(headers);
    let body: string | undefined;
    if (form) {
      headers["content-type"] = "application/x-www-form-urlencoded";
      const params = new URLSearchParams();
      for (const [name, value] of Object.entries(form))
        for (const one of Array.isArray(value) ? value : [value]) params.append(name, one);
      body = params.toString();
    }
    const response = await fetch(`${this.#url}${path}`, { method, headers, redirect: "manual", body });
    this.#keepCookies(response);
    const text = await response.text();
    const token = /name="_csrf" value="([^"]+)"/.exec(text)?.[1];
    if (token) this.#csrf = token;
    return {
      status: response.status,
      location: response.headers.get("location"),
      retryAfter: response.headers.get("retry-after"),
      text,
    };
  }

  get(path: string) {
    return this.request("GET", path);
  }

  /** A form as the page's own form sends it (with the CSRF token of the last page). */
  post(path: string, form: Record<string, string | string[]> = {}) {
    return this.request("POST", path, { _csrf: this.#csrf, ...form });
  }

  /** A multipart form (a file upload) with the CSRF token of the last page. */
  async postMultipart(
    path: string,
    fields: Record<string, string>,
    file: { name: string; text: string; filename: string },
  ) {
    const form = new FormData();
    form.append("_csrf", this.#csrf);
    for (const [name, value] of Object.entries(fields)) form.append(name, value);
    form.append(file.name, new Blob([file.text], { type: "text/plain" }), file.filename);
    return this.#post(path, form);
  }

  /** A body as given, with its content type (a hand-made multipart form, good or broken). */
  postBody(path: string, contentType: string, body: string | Uint8Array) {
    return this.#post(path, body, contentType);
  }

  async #post(path: string, body: FormData | string | Uint8Array, contentType?: string) {
    const headers: Record<string, string> = contentType ? { "content-type": contentType } : {};
    this.#sendCookies(headers);
    const response = await fetch(`${this.#url}${path}`, {
      method: "POST",
      headers,
      redirect: "manual",
      body,
    });
    return {
      status: response.status,
      location: response.headers.get("location"),
      text: await response.text(),
    };
  }

  /** JSON as the pages' script sends it (static/passkeys.js): the CSRF token of the last page in a header. */
  async postJson(path: string, json: unknown, { csrf = this.#csrf }: { csrf?: string } = {}) {
    const headers: Record<string, string> = { "content-type": "application/json", "csrf-token": csrf };
    this.#sendCookies(headers);
    const response = await fetch(`${this.#url}${path}`, {
      method: "POST",
      headers,
      redirect: "manual",
      body: JSON.stringify(json),
    });
    this.#keepCookies(response);
    const text = await response.text();
    let body: any;
    try {
      body = JSON.parse(text);
    } catch {
      body = undefined;
    }
    return { status: response.status, location: response.headers.get("location"), text, body };
  }

  #sendCookies(headers: Record<string, string>): void {
    if (this.#cookies.size > 0)
      headers.cookie = [...this.#cookies].map(([name, value]) => `${name}=${value}`).join("; ");
  }

  #keepCookies(response: Response): void {
    for (const line of response.headers.getSetCookie()) {
      const [pair = ""] = line.split(";");
      const [name = "", value = ""] = pair.split("=");
      if (value === "") this.#cookies.delete(name);
      else this.#cookies.set(name, value);
    }
  }

  /** The CSRF token of the last page seen. */
  get csrf(): string {
    return this.#csrf;
  }

  async signIn(email: string, password = defaultPassword) {
    await this.get("/login");
    const answer = await this.post("/login", { email, password });
    assert.equal(answer.location, "/account", `${email} signed in`);
  }
}

/** The error shown next to a field of an answered form, or null. */
export const fieldError = (html: string, field: string): string | null =>
  new RegExp(`<p class="error" id="field-${field}-error">([^<]*)</p>`).exec(html)?.[1] ?? null;
