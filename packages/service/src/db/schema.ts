import type { ColumnType, Generated } from "kysely";

/**
 * Table types. Conventions, the same on every dialect:
 * - times are whole Unix seconds (BIGINT): no time-zone ambiguity, cheap to compare;
 * - flags are written as 0/1 and read back as boolean or number depending on the driver
 *   (PostgreSQL BOOLEAN, MariaDB TINYINT(1), SQLite INTEGER): read them through `flag()`;
 * - lists and objects are JSON text, parsed in the store.
 */
export type Flag = ColumnType<boolean | number, 0 | 1, 0 | 1>;
/** A flag with a database default: optional on insert. */
export type DefaultedFlag = ColumnType<boolean | number, 0 | 1 | undefined, 0 | 1>;
/** A number with a database default: optional on insert. */
export type DefaultedNumber = ColumnType<number, number | undefined, number>;
export type UnixTime = number;

export interface DomainTable {
  id: Generated<number>;
  name: string;
  invitation_enabled: DefaultedFlag;
  invitation_limit: DefaultedNumber;
  invitation_waiting_period_days: DefaultedNumber;
  /** The default of "mail apps must use app passwords" for the domain's users. */
  app_passwords_required: DefaultedFlag;
  created_at: UnixTime;
  updated_at: UnixTime;
}

export interface UserTable {
  id: Generated<number>;
  email: string;
  domain_id: number;
  password: string;
  roles: string;
  password_change_required: Flag;
  quota: number | null;
  smtp_quota_per_hour: number | null;
  smtp_quota_per_day: number | null;
  mail_crypt: Flag;
  mail_crypt_public_key: string | null;
  mail_crypt_secret_box: string | null;
  recovery_secret_box: string | null;
  recovery_start_time: UnixTime | null;
  totp_secret: string | null;
  totp_confirmed: Flag;
  totp_backup_codes: string;
  totp_last_step: number | null;
  last_login_time: UnixTime | null;
  created_at: UnixTime;
  updated_at: UnixTime;
  deleted: Flag;
  /** "Mail apps must use app passwords": null follows the domain's default. */
  app_passwords_required: ColumnType<boolean | number | null, 0 | 1 | null | undefined, 0 | 1 | null>;
  /** The user may sign in on the web with a passkey alone. */
  passkey_sign_in: DefaultedFlag;
  /**
   * The account password may have an app password's form (set before the policy refused that
   * form, or imported as a hash): IMAP and SMTP then try such a secret as the password too.
   */
  password_app_form: DefaultedFlag;
  /**
   * The secret box's binding to the password hash (credentials/password-check.ts): while it
   * matches both, the box alone checks the password.
   */
  secret_box_binding: ColumnType<string | null, string | null | undefined, string | null>;
}

export interface AliasTable {
  id: Generated<number>;
  source: string;
  domain_id: number;
  destinations: string;
  user_id: number | null;
  smtp_quota_per_hour: number | null;
  smtp_quota_per_day: number | null;
  random: DefaultedFlag;
  note: string | null;
  created_at: UnixTime;
  updated_at: UnixTime;
  deleted: Flag;
}

export interface ApiTokenTable {
  id: Generated<number>;
  name: string;
  scopes: string;
  token_hash: string;
  created_at: UnixTime;
  last_used_at: UnixTime | null;
}

export interface OpenPgpKeyTable {
  id: Generated<number>;
  email: string;
  domain_id: number;
  key_id: string;
  fingerprint: string;
  expires_at: UnixTime | null;
  key_data: string;
  wkd_hash: string;
  uploader_id: number | null;
  created_at: UnixTime;
  updated_at: UnixTime;
}

export interface SettingTable {
  name: string;
  value: string;
  updated_at: UnixTime;
}

export interface WebhookEndpointTable {
  id: Generated<number>;
  url: string;
  secret: string;
  events: string;
  enabled: Flag;
  created_at: UnixTime;
  updated_at: UnixTime;
}

export interface WebhookEndpointDomainTable {
  endpoint_id: number;
  domain_id: number;
}

export type DeliveryStatus = "pending" | "success" | "failed";

/**
 * The columns of a leased outbox (the webhook deliveries, the e-mail outbox), which the one worker
 * that delivers outboxes (outbox/leased-worker.ts) reads and writes.
 */
export interface LeasedOutboxColumns {
  id: string;
  status: DeliveryStatus;
  attempts: number;
  next_attempt_at: UnixTime | null;
  claimed_until: UnixTime | null;
  claim_token: string | null;
  error: string | null;
  created_at: UnixTime;
}

export interface WebhookDeliveryTable extends LeasedOutboxColumns {
  /** ULID, sent as X-Webhook-Id. */
  id: string;
  endpoint_id: number;
  type: string;
  /** The exact bytes sent and signed. */
  body: string;
  signature: string;
  response_code: number | null;
  response_body: string | null;
  delivered_at: UnixTime | null;
}

export interface JobRunTable {
  name: string;
  period_start: UnixTime;
  started_at: UnixTime;
  finished_at: UnixTime | null;
  owner: string;
  result: string | null;
}

export interface InviteCodeTable {
  id: Generated<number>;
  code: string;
  domain_id: number;
  /** The inviter; null once that user is gone. */
  user_id: number | null;
  redeemed_at: UnixTime | null;
  redeemed_by_id: number | null;
  created_at: UnixTime;
}

export interface ReservedNameTable {
  id: Generated<number>;
  name: string;
  created_at: UnixTime;
  updated_at: UnixTime;
}

export type WebSessionStage = "second_factor" | "signed_in";

export interface WebSessionTable {
  /** SHA-256 of the cookie's value: a leaked table does not hand out sessions. */
  id_hash: string;
  user_id: number;
  stage: WebSessionStage;
  /** JSON: flash messages and the pending steps of multi-page flows. */
  data: string;
  client_address: string | null;
  user_agent: string | null;
  created_at: UnixTime;
  last_seen_at: UnixTime;
}

export interface SignInFailureTable {
  /** `account:<address>` or `client:<ip>`. */
  subject: string;
  failures: number;
  last_failure_at: UnixTime;
  blocked_until: UnixTime;
  /** The end of the lease of a check in flight, in milliseconds; 0 or past = none. */
  busy_until: Generated<number>;
}

/** A client (address group or web device) that signed in to the account before. */
export interface TrustedClientTable {
  account: string;
  client: string;
  last_success_at: UnixTime;
}

export interface MailOutboxTable extends LeasedOutboxColumns {
  recipient: string;
  subject: string;
  body: string;
  sent_at: UnixTime | null;
}

export interface AuditLogTable {
  id: Generated<number>;
  at: UnixTime;
  /** Who acted: a user's address, `console` or `api-token:<name>`. */
  actor: string;
  actor_domain_id: number | null;
  action: string;
  target: string | null;
  target_domain_id: number | null;
  /** JSON of the changed fields; never a password or secret. */
  detail: string | null;
  client_address: string | null;
}

export interface SecurityEventTable {
  id: Generated<number>;
  occurred_at: UnixTime;
  /** accounts/security-events.ts `securityEventTypes`. */
  type: string;
  user_id: number | null;
  /** The account's address at the time. */
  email: string | null;
  domain_id: number | null;
  /** web, passdb, mta_auth, webmail, identity, console, admin_api, job. */
  door: string;
  client_address: string | null;
  /** Who acted when not the owner: an admin's address, `console`, `api-token:<name>`. */
  actor: string | null;
  /** JSON of the event's typed detail; never a secret. */
  detail: string | null;
}

export type AppPasswordScope = "mail" | "smtp";

export interface AppPasswordTable {
  id: Generated<number>;
  user_id: number;
  /** The user's name for it ("Phone"). */
  name: string;
  /** mail: IMAP and SMTP; smtp: SMTP only. */
  scope: AppPasswordScope;
  /** Hex HMAC-SHA256 of the normalised app password under the installation secret. */
  lookup_hash: string;
  /** The user's MailCrypt private key sealed under a key derived from the app password; null without keys. */
  secret_box: string | null;
  created_at: UnixTime;
  /** Written at most once an hour per app password. */
  last_used_at: UnixTime | null;
  last_used_address: string | null;
}

export interface PasskeyTable {
  id: Generated<number>;
  user_id: number;
  /** The WebAuthn credential id, base64url. */
  credential_id: string;
  /** The COSE public key, base64url. */
  public_key: string;
  /** The authenticator's signature counter as last seen (0: it keeps none). */
  counter: DefaultedNumber;
  /** JSON list of the authenticator's transports. */
  transports: ColumnType<string, string | undefined, string>;
  name: string;
  created_at: UnixTime;
  last_used_at: UnixTime | null;
}

export type PasskeyChallengePurpose = "register" | "second_factor" | "sign_in";

export interface PasskeyChallengeTable {
  id: Generated<number>;
  /** base64url, as the browser signs it. */
  challenge: string;
  purpose: PasskeyChallengePurpose;
  /** The user it was made for; null for a sign-in with a passkey alone. */
  user_id: number | null;
  expires_at: UnixTime;
}

export interface Database {
  domains: DomainTable;
  users: UserTable;
  aliases: AliasTable;
  api_tokens: ApiTokenTable;
  openpgp_keys: OpenPgpKeyTable;
  settings: SettingTable;
  webhook_endpoints: WebhookEndpointTable;
  webhook_endpoint_domains: WebhookEndpointDomainTable;
  webhook_deliveries: WebhookDeliveryTable;
  job_runs: JobRunTable;
  invite_codes: InviteCodeTable;
  reserved_names: ReservedNameTable;
  web_sessions: WebSessionTable;
  sign_in_failures: SignInFailureTable;
  trusted_clients: TrustedClientTable;
  mail_outbox: MailOutboxTable;
  audit_log: AuditLogTable;
  security_events: SecurityEventTable;
  app_passwords: AppPasswordTable;
  passkeys: PasskeyTable;
  passkey_challenges: PasskeyChallengeTable;
}

export const flag = (value: boolean | number): boolean => value === true || value === 1;
export const toFlag = (value: boolean): 0 | 1 => (value ? 1 : 0);
