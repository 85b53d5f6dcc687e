import type { Kysely } from "kysely";
import type { Database } from "../db/schema.ts";
import { managedDomain } from "./queries.ts";
import type { SettingsService } from "./settings.ts";

/**
 * The MTA-STS policy for the domain behind a `mta-sts.<domain>` host name, or null when the
 * host is not such a name of a managed domain or the policy would be unusable (no MX for a mode
 * other than none).
 */
export async function mtaStsPolicy(
  host: string | undefined,
  db: Kysely<Database>,
  settings: SettingsService,
): Promise<string | null> {
  const name = (host ?? "").toLowerCase().replace(/:\d+$/, "").replace(/\.$/, "");
  if (!name.startsWith("mta-sts.")) return null;
  const domain = name.slice("mta-sts.".length);
  if (domain === "" || (await managedDomain(db, domain)) === null) return null;
  const all = await settings.all();
  const mx = all.mta_sts_mx
    .split("\n")
    .map((line) => line.trim())
    .filter((line) => line !== "");
  if (all.mta_sts_mode !== "none" && mx.length === 0) return null;
  const lines = [
    "version: STSv1",
    `mode: ${all.mta_sts_mode}`,
    ...mx.map((host) => `mx: ${host}`),
    `max_age: ${all.mta_sts_max_age}`,
  ];
  return `${lines.join("\r\n")}\r\n`;
}
