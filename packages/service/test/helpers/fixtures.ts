import type { Kysely } from "kysely";
import { consoleActor } from "../../src/accounts/admin-scope.ts";
import { actorOrigin } from "../../src/accounts/security-events.ts";
import type { Database } from "../../src/db/schema.ts";

/** The password of the test users (long enough for every policy the service has). */
export const password = "correct horse battery staple";

/**
 * Marks users deleted directly in the table, as an old or foreign row would be, without what a
 * deletion through the service also does (reset credentials, webhooks, alias clean-up).
 */
export async function markDeleted(db: Kysely<Database>, ...emails: string[]): Promise<void> {
  await db.updateTable("users").set({ deleted: 1 }).where("email", "in", emails).execute();
}

/** Who makes the changes a test makes through the services directly (the security events' origin). */
export const byTest = actorOrigin(consoleActor);
