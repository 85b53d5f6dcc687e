import { createHash } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";

/** A password the range API below lists as leaked. */
export const leaked = "password12345678";

/**
 * A local server speaking the k-anonymity range API of leaked passwords (Have I Been Pwned's
 * protocol): SHA-1 suffixes of the prefix asked for, with counts (and a padding line); `leaked` is
 * in its list. `asked` records each prefix asked for.
 */
export async function startRangeApi(): Promise<{ server: Server; url: string; asked: string[] }> {
  const asked: string[] = [];
  const hash = createHash("sha1").update(leaked).digest("hex").toUpperCase();
  const server = createServer((request, response) => {
    const prefix = (request.url ?? "").split("/").pop() ?? "";
    asked.push(prefix);
    const lines = ["0000000000000000000000000000000000A:0"];
    if (prefix === hash.slice(0, 5)) lines.push(`${hash.slice(5)}:42`);
    response.end(lines.join("\r\n"));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/range`, asked };
}
