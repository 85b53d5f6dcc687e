import { benchPassword } from "./dataset.ts";

/**
 * A person signing in on the web page, as a browser does: the form's CSRF cookie and token, then
 * the POST; the session cookie it sets (`session=...`).
 */
export async function webSignIn(url: string, email: string): Promise<string> {
  const form = await fetch(`${url}/login`);
  const csrfCookie = (form.headers.getSetCookie().find((c) => c.startsWith("csrf=")) ?? "").split(";")[0];
  const token = /name="_csrf" value="([^"]+)"/.exec(await form.text())?.[1] ?? "";
  const answer = await fetch(`${url}/login`, {
    method: "POST",
    redirect: "manual",
    headers: { "content-type": "application/x-www-form-urlencoded", cookie: csrfCookie ?? "" },
    body: new URLSearchParams({ _csrf: token, email, password: benchPassword }).toString(),
  });
  const session = answer.headers.getSetCookie().find((c) => c.startsWith("session="));
  if (answer.status !== 303 || !session) throw new Error(`web sign-in of ${email} answered ${answer.status}`);
  return session.split(";")[0] as string;
}
