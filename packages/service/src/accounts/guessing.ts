import type { Kysely, Transaction } from "kysely";
import type { Database } from "../db/schema.ts";
import { defaultLocale, type Locale } from "../i18n/catalogue.ts";
import { ownerOrigin, type SecurityEventLog } from "./security-events.ts";
import type { SecretKind } from "./sign-in-guard.ts";
import type { UserService } from "./users.ts";

/** The e-mail outbox as the guessing notice needs it (mail/outbox.ts). */
export interface GuessingMail {
  readonly enabled: boolean;
  guessing(
    trx: Transaction<Database>,
    input: { email: string; failures: number; clients: string[]; locale: Locale },
  ): Promise<unknown>;
}

/**
 * What happens when an account's daily ceiling of failed sign-ins from new clients is reached
 * (sign-in-guard.ts): the security event, and one e-mail to the owner with the count and the latest
 * client addresses. Unknown addresses get neither (their answers stay the same all the same).
 */
export function guessingNotice(
  db: Kysely<Database>,
  users: UserService,
  events: SecurityEventLog,
  mail: GuessingMail,
): (account: string, kind: SecretKind) => Promise<void> {
  return async (account, kind) => {
    if (kind !== "password") return;
    const user = await users.findByEmail(account);
    if (!user || user.deleted) return;
    const recent = await events.recentFailures(user.email, 5);
    await db.transaction().execute(async (trx) => {
      await events.record(trx, user, ownerOrigin("job"), {
        type: "guessing.ceiling_reached",
        detail: { failures: recent.failures, clients: recent.clients.length },
      });
      if (mail.enabled)
        await mail.guessing(trx, {
          email: user.email,
          failures: recent.failures,
          clients: recent.clients.flatMap((client) => (client.clientAddress ? [client.clientAddress] : [])),
          locale: defaultLocale,
        });
    });
  };
}
