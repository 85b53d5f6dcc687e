import type { Kysely, Transaction } from "kysely";
import type { Database } from "../db/schema.ts";
import { inTransaction } from "../db/transaction.ts";
import { refusal } from "../errors.ts";
import { parseAddress } from "./addresses.ts";

type SettingType = "string" | "integer" | "boolean" | "email" | "url" | "text" | "choice";

interface SettingDefinition {
  type: SettingType;
  default: string | number | boolean;
  optional?: boolean;
  min?: number;
  max?: number;
  minLength?: number;
  maxLength?: number;
  choices?: readonly (string | number)[];
  description: string;
}

/** The catalogue of the reference implementation (section 4.2) plus our two inactivity periods. */
export const settingDefinitions = {
  app_name: {
    type: "string",
    default: "Userli",
    minLength: 3,
    maxLength: 30,
    description: "Name shown to users",
  },
  app_url: { type: "url", default: "https://users.example.org", description: "Base URL for links" },
  project_name: {
    type: "string",
    default: "example.org",
    description: "Project name (stored only; userli's e-mail texts and TOTP issuer)",
  },
  project_url: { type: "url", default: "https://www.example.org", description: "Project web site" },
  email_sender_address: {
    type: "email",
    default: "admin@example.org",
    description: "From address of e-mails",
  },
  email_notification_address: {
    type: "email",
    default: "monitoring@example.org",
    description: "Recipient of operator reports",
  },
  webmail_url: { type: "url", default: "", optional: true, description: "Link to the webmail" },
  weekly_report_enabled: { type: "boolean", default: true, description: "Send the weekly report" },
  smtp_quota_limit_per_hour: {
    type: "integer",
    default: 0,
    min: 0,
    description: "Default SMTP messages per hour (0 = unlimited)",
  },
  smtp_quota_limit_per_day: {
    type: "integer",
    default: 0,
    min: 0,
    description: "Default SMTP messages per day (0 = unlimited)",
  },
  mail_crypt: {
    type: "integer",
    default: 2,
    choices: [0, 1, 2, 3],
    description: "MailCrypt level: 0 off, 1 optional, 2 new users, 3 all users",
  },
  mta_sts_mode: {
    type: "choice",
    default: "testing",
    choices: ["none", "testing", "enforce"],
    description: "MTA-STS mode",
  },
  mta_sts_mx: { type: "text", default: "", optional: true, description: "MX host names, one per line" },
  mta_sts_max_age: {
    type: "integer",
    default: 604800,
    min: 86400,
    max: 31557600,
    description: "MTA-STS max_age in seconds",
  },
  postmaster_address: {
    type: "email",
    default: "",
    optional: true,
    description: "Destination of postmaster@ every managed domain",
  },
  abuse_address: {
    type: "email",
    default: "",
    optional: true,
    description: "Destination of abuse@ every managed domain",
  },
  inactive_user_days: {
    type: "integer",
    default: 730,
    min: 30,
    max: 36500,
    description: "Days without sign-in after which a user is inactive and listed to the mailbox janitor",
  },
  inactive_user_removal_grace_days: {
    type: "integer",
    default: 7,
    min: 0,
    max: 36500,
    description: "Days an inactive user stays listed before the inactive-user job deletes it",
  },
  web_session_idle_minutes: {
    type: "integer",
    default: 60,
    min: 5,
    max: 10080,
    description: "Minutes without a request after which a web session ends",
  },
  web_session_lifetime_hours: {
    type: "integer",
    default: 24,
    min: 1,
    max: 8760,
    description: "Hours after sign-in after which a web session ends, however active",
  },
  security_event_days: {
    type: "integer",
    default: 90,
    min: 1,
    max: 3650,
    description: "Days the security event log keeps an event (sign-ins, password and two-factor changes)",
  },
} as const satisfies Record<string, SettingDefinition>;

export type SettingName = keyof typeof settingDefinitions;
type ValueOf<D> = D extends { type: "integer" } ? number : D extends { type: "boolean" } ? boolean : string;
export type Settings = { [K in SettingName]: ValueOf<(typeof settingDefinitions)[K]> };

export const isSettingName = (name: string): name is SettingName => Object.hasOwn(settingDefinitions, name);

export const settingUnknown = refusal<{ setting: string }>(
  "setting.unknown",
  "invalid",
  ({ setting }) => `unknown setting: ${setting}`,
);
/** One rule of a setting's value; `setting` names it, the other parameters are the rule's bounds. */
const settingRule = <P extends object = Record<never, never>>(rule: string, why: (params: P) => string) =>
  refusal<P & { setting: string }>(`setting.${rule}`, "invalid", (p) => `${p.setting}: ${why(p)}`);
export const settingRequired = settingRule("required", () => "a value is required");
export const settingNotInteger = settingRule("not_integer", () => "must be a whole number");
export const settingTooSmall = settingRule<{ min: number }>(
  "too_small",
  ({ min }) => `must be at least ${min}`,
);
export const settingTooLarge = settingRule<{ max: number }>(
  "too_large",
  ({ max }) => `must be at most ${max}`,
);
export const settingNotChoice = settingRule<{ choices: string }>(
  "not_choice",
  ({ choices }) => `must be one of ${choices}`,
);
export const settingNotBoolean = settingRule("not_boolean", () => "must be true or false");
export const settingNotText = settingRule("not_text", () => "must be a string");
export const settingBlank = settingRule("blank", () => "must not be blank");
export const settingTooShort = settingRule<{ min: number }>(
  "too_short",
  ({ min }) => `must be at least ${min} characters`,
);
export const settingTooLong = settingRule<{ max: number }>(
  "too_long",
  ({ max }) => `must be at most ${max} characters`,
);
export const settingNotAddress = settingRule("not_address", () => "must be an e-mail address");
export const settingNotUrl = settingRule("not_url", () => "must be an http(s) URL");

/** Checks one value and returns its stored string form; throws the refusal naming the setting. */
export function normalizeSetting(name: string, value: unknown): string {
  if (!isSettingName(name)) throw settingUnknown({ setting: name });
  const def: SettingDefinition = settingDefinitions[name];
  const setting = name;
  if (value === null || value === undefined) throw settingRequired({ setting });
  switch (def.type) {
    case "integer": {
      const text = String(value).trim();
      if (!/^-?\d+$/.test(text)) throw settingNotInteger({ setting });
      const n = Number(text);
      if (def.min !== undefined && n < def.min) throw settingTooSmall({ setting, min: def.min });
      if (def.max !== undefined && n > def.max) throw settingTooLarge({ setting, max: def.max });
      if (def.choices && !def.choices.includes(n))
        throw settingNotChoice({ setting, choices: def.choices.join(", ") });
      return String(n);
    }
    case "boolean": {
      if (value === true || value === "true" || value === "1" || value === 1) return "1";
      if (value === false || value === "false" || value === "0" || value === 0) return "0";
      throw settingNotBoolean({ setting });
    }
    default: {
      if (typeof value !== "string") throw settingNotText({ setting });
      const text = def.type === "text" ? value : value.trim();
      if (text === "") {
        if (def.optional) return "";
        throw settingBlank({ setting });
      }
      if (def.minLength !== undefined && text.length < def.minLength)
        throw settingTooShort({ setting, min: def.minLength });
      if (text.length > (def.maxLength ?? 4000))
        throw settingTooLong({ setting, max: def.maxLength ?? 4000 });
      if (def.type === "email" && parseAddress(text) === null) throw settingNotAddress({ setting });
      if (def.type === "url" && !isWebAddress(text)) throw settingNotUrl({ setting });
      if (def.choices && !def.choices.includes(text))
        throw settingNotChoice({ setting, choices: def.choices.join(", ") });
      return text;
    }
  }
}

function decode(name: SettingName, stored: string | null | undefined): Settings[SettingName] {
  const def: SettingDefinition = settingDefinitions[name];
  if (stored === undefined || stored === null) return def.default;
  if (def.type === "integer") return Number(stored);
  if (def.type === "boolean") return stored === "1" || stored === "true";
  return stored;
}

/** A setting's value from its stored text (null or undefined: not stored, the default). */
export const decodeSetting = <K extends SettingName>(name: K, stored: string | null | undefined) =>
  decode(name, stored) as Settings[K];

/**
 * A setting's stored text as a scalar subquery, so a lookup reads the settings it needs in the
 * same statement (one round trip); decode the column with `decodeSetting`.
 */
/**
 * An http(s) address of a host with a dot in its name, or `localhost` (an installation tried out on
 * one machine: `npm start` listens on localhost).
 */
function isWebAddress(text: string): boolean {
  if (!/^https?:\/\/[^\s/]+(\/\S*)?$/.test(text)) return false;
  try {
    const { hostname } = new URL(text);
    return hostname === "localhost" || /^[^.]+(\.[^.]+)+$/.test(hostname) || hostname.startsWith("[");
  } catch {
    return false;
  }
}

export const storedSetting = (db: Kysely<Database>, name: SettingName) =>
  db.selectFrom("settings").select("value").where("name", "=", name);

/**
 * Settings are read from the database on each use (one tiny table), so a change made through any
 * instance applies everywhere at once.
 */
export class SettingsService {
  readonly #db: Kysely<Database>;

  constructor(db: Kysely<Database>) {
    this.#db = db;
  }

  async all(db: Kysely<Database> = this.#db): Promise<Settings> {
    const rows = await db.selectFrom("settings").select(["name", "value"]).execute();
    const stored = new Map(rows.map((row) => [row.name, row.value]));
    const result: Record<string, unknown> = {};
    for (const name of Object.keys(settingDefinitions) as SettingName[]) {
      result[name] = decode(name, stored.get(name));
    }
    return result as Settings;
  }

  /** A few settings in one statement (the web session check reads two on every page). */
  async some<K extends SettingName>(names: readonly K[]): Promise<Pick<Settings, K>> {
    const rows = await this.#db
      .selectFrom("settings")
      .select(["name", "value"])
      .where("name", "in", names)
      .execute();
    const stored = new Map(rows.map((row) => [row.name, row.value]));
    return Object.fromEntries(names.map((name) => [name, decode(name, stored.get(name))])) as Pick<
      Settings,
      K
    >;
  }

  async get<K extends SettingName>(name: K): Promise<Settings[K]> {
    const row = await this.#db
      .selectFrom("settings")
      .select("value")
      .where("name", "=", name)
      .executeTakeFirst();
    return decode(name, row?.value) as Settings[K];
  }

  /**
   * Validates every value first; writes all of them in one transaction or none. Values are
   * checked here, whatever their type: the console passes each as the text typed.
   */
  async update(
    values: Readonly<Record<string, string | number | boolean | null | undefined>>,
    trx?: Transaction<Database>,
  ): Promise<Settings> {
    const normalized = Object.entries(values).map(
      ([name, value]) => [name, normalizeSetting(name, value)] as const,
    );
    const now = Math.floor(Date.now() / 1000);
    return inTransaction(this.#db, trx, async (trx) => {
      for (const [name, value] of normalized) {
        const updated = await trx
          .updateTable("settings")
          .set({ value, updated_at: now })
          .where("name", "=", name)
          .executeTakeFirst();
        if (Number(updated.numUpdatedRows) === 0) {
          await trx.insertInto("settings").values({ name, value, updated_at: now }).execute();
        }
      }
      return this.all(trx);
    });
  }
}
