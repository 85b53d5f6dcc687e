import { timingSafeEqual } from "node:crypto";
import type { Kysely } from "kysely";
import type { InstallationSecret } from "../config.ts";
import type { Database } from "../db/schema.ts";
import { refusal } from "../errors.ts";
import type { Domain, DomainService } from "./domains.ts";
import { type SettingName, type SettingsService, settingDefinitions } from "./settings.ts";
import type { CreatedUser, UserService } from "./users.ts";

export const setupStepClosed = refusal<{ step: string; next: string }>(
  "setup.step_closed",
  "conflict",
  ({ step, next }) => `setup: the ${step} step is not open (next step: ${next})`,
);
export const setupNoPrimaryDomain = refusal(
  "setup.no_primary_domain",
  "conflict",
  () => "setup: no primary domain",
);

export const setupCodeWrong = refusal(
  "setup.code_wrong",
  "forbidden",
  () =>
    "setup: the set-up code is wrong (the service logs it at start; bin/console app:setup:code prints it)",
);

/**
 * The set-up code: 80 bits of HMAC(installation secret, "setup-code") in Crockford's base32 (no I,
 * L, O, U), four groups of four. Derived, not stored, so every instance and the console agree.
 */
const codeAlphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";
const codeLength = 16;

function formatSetupCode(secret: InstallationSecret): string {
  const bytes = secret.keyedHash("setup-code");
  let bits = 0n;
  for (const byte of bytes.subarray(0, (codeLength * 5) / 8)) bits = (bits << 8n) | BigInt(byte);
  let code = "";
  for (let i = codeLength - 1; i >= 0; i--) code += codeAlphabet[Number((bits >> BigInt(i * 5)) & 31n)];
  return code.match(/.{4}/g)!.join("-");
}

/** As typed: case, blanks and dashes ignored; O read as 0, I and L as 1 (Crockford's rule). */
function normalizeSetupCode(given: string): string {
  return given.toUpperCase().replace(/[\s-]/g, "").replace(/O/g, "0").replace(/[IL]/g, "1");
}

/**
 * The first-run setup (reference section 5.3, `/init`): the primary domain, the first admin, the
 * basic settings. Each step is allowed only while it is not done, and the step itself checks
 * that, not only the page showing its form (the reference's POST handlers did not: its bug 14).
 *
 * "Settings not yet configured" is marked by the absence of a stored `app_url`: the wizard's last
 * step writes it, and so does an admin saving settings, the console or an import from userli. The
 * reference asked "is there any settings row", which a migration seeding one setting already
 * answered (its bug 14, second half); our migrations store other settings, never `app_url`.
 */
export type SetupStep = "domain" | "admin" | "settings" | "done";

/** The settings the wizard asks for, in the order of its form. */
export const setupSettings = [
  "app_name",
  "app_url",
  "project_name",
  "project_url",
  "email_sender_address",
  "email_notification_address",
  "postmaster_address",
  "webmail_url",
  "mail_crypt",
] as const satisfies readonly SettingName[];
export type SetupSetting = (typeof setupSettings)[number];

/** The setting whose stored row marks the settings step done. */
const configuredMarker: SettingName = "app_url";

export class SetupService {
  readonly #db: Kysely<Database>;
  readonly #domains: DomainService;
  readonly #users: UserService;
  readonly #settings: SettingsService;
  readonly #code: string;

  constructor(
    db: Kysely<Database>,
    domains: DomainService,
    users: UserService,
    settings: SettingsService,
    installationSecret: InstallationSecret,
  ) {
    this.#db = db;
    this.#domains = domains;
    this.#users = users;
    this.#settings = settings;
    this.#code = formatSetupCode(installationSecret);
  }

  /**
   * The set-up code while the first administrator is still to be made (no user exists: the first
   * user /init makes is the administrator), else null. Logged at start and printed by the console
   * only then: once an administrator exists the code opens nothing.
   */
  async openSetupCode(): Promise<string | null> {
    const step = await this.step();
    return step === "domain" || step === "admin" ? this.#code : null;
  }

  /** Refuses unless `given` is the set-up code (compared in constant time). */
  #checkCode(given: string): void {
    const expected = Buffer.from(normalizeSetupCode(this.#code));
    const actual = Buffer.from(normalizeSetupCode(typeof given === "string" ? given : ""));
    const same = actual.length === expected.length && timingSafeEqual(actual, expected);
    if (!same) throw setupCodeWrong();
  }

  /** The first step not done yet. */
  async step(): Promise<SetupStep> {
    if (!(await this.#domains.primary())) return "domain";
    const user = await this.#db.selectFrom("users").select("id").limit(1).executeTakeFirst();
    if (!user) return "admin";
    const marker = await this.#db
      .selectFrom("settings")
      .select("name")
      .where("name", "=", configuredMarker)
      .executeTakeFirst();
    return marker ? "done" : "settings";
  }

  async #expect(step: SetupStep): Promise<void> {
    const now = await this.step();
    if (now !== step) throw setupStepClosed({ step, next: now });
  }

  /** Step 1, only while no domain exists and with the set-up code: the primary domain. */
  async createPrimaryDomain(name: string, setupCode: string): Promise<Domain> {
    await this.#expect("domain");
    this.#checkCode(setupCode);
    return this.#domains.create(name);
  }

  /**
   * Step 2, only while no user exists and with the set-up code: `postmaster@<primary domain>` with ROLE_ADMIN. As in the
   * reference, without MailCrypt keys (so no recovery token to show); at MailCrypt level 3 the
   * first sign-in makes them.
   */
  async createFirstAdmin(password: string, setupCode: string): Promise<CreatedUser> {
    await this.#expect("admin");
    this.#checkCode(setupCode);
    const primary = await this.#domains.primary();
    if (!primary) throw setupNoPrimaryDomain();
    return this.#users.create({
      email: `postmaster@${primary.name}`,
      password,
      roles: ["ROLE_ADMIN"],
      mailCrypt: false,
    });
  }

  /** The values the settings form starts with: what is stored, else the reference's suggestions. */
  async settingsProposal(): Promise<Record<SetupSetting, string>> {
    const [primary, current, storedRows] = await Promise.all([
      this.#domains.primary(),
      this.#settings.all(),
      this.#db.selectFrom("settings").select("name").execute(),
    ]);
    const stored = new Set(storedRows.map((row) => row.name));
    const domain = primary?.name ?? "example.org";
    const suggested: Partial<Record<SetupSetting, string>> = {
      app_url: `https://users.${domain}`,
      project_name: domain,
      project_url: `https://${domain}`,
      email_sender_address: `noreply@${domain}`,
      email_notification_address: `admin@${domain}`,
      postmaster_address: `postmaster@${domain}`,
    };
    const values = {} as Record<SetupSetting, string>;
    for (const name of setupSettings)
      values[name] = stored.has(name) ? String(current[name]) : (suggested[name] ?? String(current[name]));
    return values;
  }

  /** Step 3, only while not configured: the basic settings (checked by the settings' own rules). */
  async saveSettings(values: Record<SetupSetting, string>): Promise<void> {
    await this.#expect("settings");
    const chosen: Record<string, string> = {};
    for (const name of setupSettings) chosen[name] = values[name] ?? "";
    await this.#settings.update(chosen);
  }
}

/** The kind of a setup setting's value (for the form: a choice is a select). */
export const setupSettingType = (name: SetupSetting) => settingDefinitions[name].type;
