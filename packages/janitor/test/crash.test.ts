/**
 * Crash safety: `kill -9` in the middle of a burst of webhooks must leave a readable file (header,
 * whole lines only) that holds every entry the daemon had acknowledged.
 */
import assert from "node:assert/strict";
import { readdirSync } from "node:fs";
import { after, test } from "node:test";
import { cleanup, event, postWebhook, readText, startJanitor, tempDir, waitFor } from "./helpers.ts";

const dirs: string[] = [];
after(() => cleanup(...dirs));

const LINE = /^[a-z0-9.]+@example\.org,\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$/;

function checkFile(path: string, acknowledged: Set<string>): string[] {
  const text = readText(path);
  assert.ok(text.endsWith("\n"), "the file ends with a whole line");
  const [header, ...lines] = text.slice(0, -1).split("\n");
  assert.equal(header, "email,timestamp");
  for (const line of lines) assert.match(line, LINE);
  const emails = lines.map((line) => line.split(",")[0] as string);
  assert.equal(new Set(emails).size, emails.length, "no address twice");
  for (const email of acknowledged) assert.ok(emails.includes(email), `acknowledged ${email} is in the file`);
  return emails;
}

test("kill -9 during a burst of writes leaves a readable file with every acknowledged entry", async (t) => {
  const dir = await tempDir();
  dirs.push(dir);
  const acknowledged = new Set<string>();
  let next = 0;

  for (let round = 0; round < 3; round += 1) {
    const j = await startJanitor({ dir, env: { LOG_LEVEL: "info" } });
    const roundAcks = new Set<string>();
    let dead = false;
    const worker = async () => {
      while (!dead) {
        next += 1;
        const email = `round${round}.user${next}@example.org`;
        try {
          const answer = await postWebhook(j.url, event("user.deleted", email));
          if (answer.status === 200) {
            acknowledged.add(email);
            roundAcks.add(email);
          }
        } catch {
          return; // the daemon is gone
        }
      }
    };
    const workers = Array.from({ length: 32 }, worker);
    await waitFor("a few hundred acknowledged writes", () => roundAcks.size >= 150 + round * 50, 30_000);
    j.process.kill("SIGKILL");
    const { signal } = await j.exited;
    dead = true;
    await Promise.all(workers);
    assert.equal(signal, "SIGKILL");
    checkFile(j.csv, acknowledged);
    const leftovers = readdirSync(dir).filter((name) => name.endsWith(".tmp"));
    t.diagnostic(
      `round ${round}: ${roundAcks.size} acknowledged, temporary files left by the kill: ${leftovers.length}`,
    );
  }

  // A restart cleans up temporary files left by the kills and goes on appending.
  const j = await startJanitor({ dir, env: { LOG_LEVEL: "info" } });
  assert.deepEqual(readdirSync(dir).sort(), ["mailboxes.csv", "mailboxes.csv.seen"]);
  // The seen deliveries file went through the same kills: whole, and every acknowledged delivery in it.
  const seen = readText(`${j.csv}.seen`)
    .trimEnd()
    .split("\n")
    .map((line) => JSON.parse(line));
  assert.ok(seen.length >= acknowledged.size, `${seen.length} seen, ${acknowledged.size} acknowledged`);
  assert.equal((await postWebhook(j.url, event("user.deleted", "after.restart@example.org"))).status, 200);
  acknowledged.add("after.restart@example.org");
  assert.equal((await j.stop()).code, 0);
  const emails = checkFile(j.csv, acknowledged);
  assert.ok(emails.length >= acknowledged.size);
});
