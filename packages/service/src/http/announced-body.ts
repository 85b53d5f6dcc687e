import type { IncomingMessage } from "node:http";

/** The longest an answer waits for a body its client announced. */
export const announcedBodyWaitMs = 2000;

/**
 * Whether an answer to this request is made before the body its client announced with
 * `Expect: 100-continue` (the token guard's 401 and 403, the 503 while closing, a refused content
 * type): Node has already told the client `100 Continue`, and the body is still on its way.
 *
 * Why it matters: Dovecot's HTTP client (the Lua passdb's) announces every payload so, and a final
 * answer that reaches it together with the `100 Continue`, before it has sent the body, is not
 * taken: it waits out its request timeout and logs "Request timed out" instead of the answer
 * (docs/dovecot.md). An answer written after the body has arrived is read at once.
 */
export function answersBeforeAnnouncedBody(raw: IncomingMessage, bodyLimit: number): boolean {
  const expect = raw.headers.expect;
  if (expect === undefined || raw.complete) return false;
  if (typeof expect !== "string" || expect.toLowerCase() !== "100-continue") return false;
  const length = raw.headers["content-length"];
  return length === undefined || Number(length) <= bodyLimit;
}

/**
 * Reads (and drops) the rest of an announced body, then calls `then` once: at its end, when the
 * connection goes, past `bodyLimit` bytes, or after `announcedBodyWaitMs` at most.
 */
export function afterAnnouncedBody(raw: IncomingMessage, bodyLimit: number, then: () => void): void {
  let received = 0;
  let called = false;
  const finish = () => {
    if (called) return;
    called = true;
    clearTimeout(timer);
    raw.off("data", count);
    raw.off("end", finish);
    raw.off("close", finish);
    raw.off("error", finish);
    then();
  };
  const count = (chunk: Buffer) => {
    received += chunk.length;
    if (received > bodyLimit) finish();
  };
  const timer = setTimeout(finish, announcedBodyWaitMs);
  raw.on("data", count);
  raw.once("end", finish);
  raw.once("close", finish);
  raw.once("error", finish);
  raw.resume();
}
