import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { password } from "./helpers/fixtures.ts";
import { startService, type TestService } from "./helpers/service.ts";
import { WebClient } from "./helpers/web-client.ts";

/**
 * A web session ends `web_session_idle_minutes` after its last request and
 * `web_session_lifetime_hours` after sign-in (accounts/session-lifetimes.ts); the session check of
 * every page reads both settings in its own statement, so a change applies at the next request.
 */
describe("web session lifetimes, as the settings say", () => {
  let service: TestService;
  const now = () => Math.floor(Date.now() / 1000);

  before(async () => {
    service = await startService({ web: true });
    await service.services.domains.create("example.org");
    for (const local of ["idle", "old", "fresh"])
      await service.services.users.create({ email: `${local}@example.org`, password });
  });
  after(() => service.close());

  async function signedIn(email: string): Promise<WebClient> {
    const client = new WebClient(service.url);
    await client.signIn(email);
    assert.equal((await client.get("/account")).status, 200);
    return client;
  }

  /** Moves the user's sessions back in time: the last request and the sign-in, in seconds ago. */
  async function age(email: string, ago: { lastSeen: number; created: number }) {
    const user = await service.services.users.findByEmail(email);
    await service.services.database.db
      .updateTable("web_sessions")
      .set({ last_seen_at: now() - ago.lastSeen, created_at: now() - ago.created })
      .where("user_id", "=", user!.id)
      .execute();
  }

  test("idle past the setting's minutes: signed out; within them: still signed in", async () => {
    const idle = await signedIn("idle@example.org");
    await service.services.settings.update({ web_session_idle_minutes: 30 });
    await age("idle@example.org", { lastSeen: 29 * 60, created: 29 * 60 });
    assert.equal((await idle.get("/account")).status, 200, "29 minutes idle of 30");
    await age("idle@example.org", { lastSeen: 31 * 60, created: 31 * 60 });
    assert.equal((await idle.get("/account")).location, "/login", "31 minutes idle of 30");
  });

  test("older than the setting's hours: signed out however active", async () => {
    const fresh = await signedIn("fresh@example.org");
    const old = await signedIn("old@example.org");
    await service.services.settings.update({ web_session_lifetime_hours: 2 });
    await age("fresh@example.org", { lastSeen: 60, created: 119 * 60 });
    await age("old@example.org", { lastSeen: 60, created: 121 * 60 });
    assert.equal((await fresh.get("/account")).status, 200, "signed in 119 minutes ago of 2 hours");
    assert.equal((await old.get("/account")).location, "/login", "signed in 121 minutes ago of 2 hours");
  });
});
