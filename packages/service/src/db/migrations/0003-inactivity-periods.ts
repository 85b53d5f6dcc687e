import type { Kysely } from "kysely";
import type { VersionedMigration } from "./types.ts";

interface SettingsTable {
  settings: { name: string; value: string; updated_at: number };
}

const previousListDays = 730;
const defaultGraceDays = 7;
const minimumDays = 30;

/**
 * `inactive_user_days` meant "deleted after" (default 737) while the retention list used a fixed 730
 * days. It now means "inactive and listed after" (default 730), and the job deletes
 * `inactive_user_removal_grace_days` (default 7) later. A value an operator stored keeps its meaning:
 * users are still deleted after exactly that many days, and listed 730 days as before when that comes
 * first, else 7 days before deletion (never less than 30 days, the setting's minimum).
 */
export const inactivityPeriods: VersionedMigration = {
  async up(untyped: Kysely<unknown>) {
    const db = untyped as Kysely<SettingsTable>;
    const row = await db
      .selectFrom("settings")
      .select("value")
      .where("name", "=", "inactive_user_days")
      .executeTakeFirst();
    if (!row || !/^\d+$/.test(row.value.trim())) return;
    const removalDays = Number(row.value.trim());
    const listDays =
      removalDays >= previousListDays + defaultGraceDays
        ? previousListDays
        : Math.max(minimumDays, removalDays - defaultGraceDays);
    const graceDays = Math.max(0, removalDays - listDays);
    const now = Math.floor(Date.now() / 1000);
    await db
      .updateTable("settings")
      .set({ value: String(listDays), updated_at: now })
      .where("name", "=", "inactive_user_days")
      .execute();
    await db.deleteFrom("settings").where("name", "=", "inactive_user_removal_grace_days").execute();
    await db
      .insertInto("settings")
      .values({ name: "inactive_user_removal_grace_days", value: String(graceDays), updated_at: now })
      .execute();
  },
};
