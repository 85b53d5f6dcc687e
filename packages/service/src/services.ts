import { AliasService } from "./accounts/aliases.ts";
import { AppPasswordService } from "./accounts/app-passwords.ts";
import { DomainService } from "./accounts/domains.ts";
import { guessingNotice } from "./accounts/guessing.ts";
import { IdentityService } from "./accounts/identity.ts";
import { InviteCodeService } from "./accounts/invite-codes.ts";
import { LifecycleService } from "./accounts/lifecycle.ts";
import { PasskeyService } from "./accounts/passkeys.ts";
import { PasswordPolicy } from "./accounts/password-policy.ts";
import { RecoveryService } from "./accounts/recovery.ts";
import { RegistrationService } from "./accounts/registration.ts";
import { ReservedNameService } from "./accounts/reserved-names.ts";
import { RetentionService } from "./accounts/retention.ts";
import { SecurityEventLog } from "./accounts/security-events.ts";
import { SettingsService } from "./accounts/settings.ts";
import { SetupService } from "./accounts/setup.ts";
import { SignInService } from "./accounts/sign-in.ts";
import { SignInGuard } from "./accounts/sign-in-guard.ts";
import { TwoFactorService } from "./accounts/two-factor.ts";
import { UserAliasService } from "./accounts/user-aliases.ts";
import { UserService } from "./accounts/users.ts";
import { AdminService } from "./admin/service.ts";
import type { InstallationSecret } from "./config.ts";
import type { CryptoPool } from "./credentials/crypto-pool.ts";
import type { DatabaseHandle } from "./db/database.ts";
import { defaultLocale } from "./i18n/catalogue.ts";
import { MailOutbox } from "./mail/outbox.ts";
import { Metrics } from "./metrics/metrics.ts";
import { OpenPgpIdentityService } from "./openpgp/identities.ts";
import { OpenPgpKeyService } from "./openpgp/keys.ts";
import { WkdService } from "./openpgp/wkd.ts";
import { TokenService } from "./tokens/tokens.ts";
import { WebhookService } from "./webhooks/endpoints.ts";
import { WebhookOutbox } from "./webhooks/outbox.ts";

/** Every service, wired once; HTTP routes, console commands and jobs all use this same set. */
export interface Services {
  /** Administration with an actor: the reach rule and the audit log over the services below. */
  admin: AdminService;
  database: DatabaseHandle;
  pool: CryptoPool;
  metrics: Metrics;
  settings: SettingsService;
  domains: DomainService;
  users: UserService;
  aliases: AliasService;
  lifecycle: LifecycleService;
  signIn: SignInService;
  /** App passwords: one per mail client, each opening the encrypted mailbox (accounts/app-passwords.ts). */
  appPasswords: AppPasswordService;
  /** The one guard every check of a secret passes through (accounts/sign-in-guard.ts). */
  signInGuard: SignInGuard;
  passwordPolicy: PasswordPolicy;
  identity: IdentityService;
  retention: RetentionService;
  tokens: TokenService;
  wkd: WkdService;
  openPgpKeys: OpenPgpKeyService;
  webhooks: WebhookService;
  /** Self-service (web): two-factor enrolment, the user's own aliases, the user's OpenPGP keys. */
  twoFactor: TwoFactorService;
  /** Passkeys: registration, second factor, sign-in with a passkey alone. */
  passkeys: PasskeyService;
  userAliases: UserAliasService;
  openPgpIdentities: OpenPgpIdentityService;
  /** The e-mail outbox: `services.mail.welcome(trx, ...)` inside the change's transaction. */
  mail: MailOutbox;
  /** The security event log: written by the services above in their transactions, read by owners and admins. */
  securityEvents: SecurityEventLog;
  /** Recovery with the recovery token (the public /recovery page). */
  recovery: RecoveryService;
  /** Invitations and registration (web, admin area, importer): codes, reserved names, /init. */
  inviteCodes: InviteCodeService;
  reservedNames: ReservedNameService;
  registration: RegistrationService;
  setup: SetupService;
}

export interface ServiceOptions {
  /**
   * The installation's secret key (config.ts readInstallationSecret): backup codes are keyed with
   * it and the set-up code derived from it. Every instance and the console must hold the same.
   */
  installationSecret: InstallationSecret;
  /** Time source of the webhook outbox (tests use a fast clock). */
  clock?: () => number;
  /** PWNED_PASSWORDS_URL: the k-anonymity range API new passwords are checked against. */
  pwnedPasswordsUrl?: string | null;
  /** Where a failed range lookup is reported (it never blocks a password). */
  onPasswordLookupError?: (error: unknown) => void;
  /** Where a failure of the guard's owner e-mail is reported (it never changes an answer). */
  onGuardError?: (error: unknown) => void;
  /** SMTP_URL: e-mail is written to the outbox only when a relay is configured. */
  smtpUrl?: string | null;
}

export function createServices(
  database: DatabaseHandle,
  pool: CryptoPool,
  options: ServiceOptions,
): Services {
  const { db } = database;
  const metrics = new Metrics(db);
  const events = new WebhookOutbox(options.clock);
  const settings = new SettingsService(db);
  const passwordPolicy = new PasswordPolicy(options.pwnedPasswordsUrl ?? null, {
    ...(options.onPasswordLookupError ? { onLookupError: options.onPasswordLookupError } : {}),
  });
  const securityEvents = new SecurityEventLog(db);
  const users = new UserService(
    db,
    pool,
    settings,
    events,
    passwordPolicy,
    securityEvents,
    options.installationSecret,
  );
  const domains = new DomainService(db);
  const mail = new MailOutbox({ enabled: Boolean(options.smtpUrl), clock: options.clock });
  // The mail server's sign-ins with app passwords read through the keyed reads, as the lookups do.
  const keyReader = database.keyReader.bind(database);
  const signInGuard = new SignInGuard(db, {
    keyReader,
    // The owner hears once per window that someone is guessing; unknown addresses get nothing.
    onCeiling: guessingNotice(db, users, securityEvents, mail),
    ...(options.onGuardError ? { onError: options.onGuardError } : {}),
  });
  const inviteCodes = new InviteCodeService(db, signInGuard);
  const reservedNames = new ReservedNameService(db);
  const appPasswords = new AppPasswordService(
    db,
    pool,
    options.installationSecret,
    securityEvents,
    keyReader,
  );
  const lifecycle = new LifecycleService(db, pool, settings, users, events, securityEvents, appPasswords);
  const openPgpKeys = new OpenPgpKeyService(db);
  // Every alias a user creates on the pages sends "alias created" to its owner (reference 5.10).
  const userAliases = new UserAliasService(db, lifecycle, reservedNames, (trx, alias, owner, { locale }) =>
    mail.aliasCreated(trx, { email: owner.email, alias: alias.source, locale: locale ?? defaultLocale }),
  );
  const services: Omit<Services, "admin"> = {
    database,
    pool,
    metrics,
    settings,
    domains,
    users,
    aliases: new AliasService(db, users),
    lifecycle,
    signInGuard,
    passwordPolicy,
    signIn: new SignInService(
      db,
      pool,
      settings,
      users,
      signInGuard,
      securityEvents,
      appPasswords,
      (result) => metrics.signIns.inc({ result }),
      keyReader,
    ),
    appPasswords,
    identity: new IdentityService(db),
    retention: new RetentionService(db, users, settings),
    tokens: new TokenService(db),
    wkd: new WkdService(db),
    openPgpKeys,
    webhooks: new WebhookService(db),
    twoFactor: new TwoFactorService(users, settings),
    passkeys: new PasskeyService(db, settings, signInGuard, securityEvents, options.installationSecret),
    userAliases,
    openPgpIdentities: new OpenPgpIdentityService(db, openPgpKeys, userAliases),
    mail,
    securityEvents,
    recovery: new RecoveryService(db, pool, signInGuard, mail, passwordPolicy, securityEvents),
    inviteCodes,
    reservedNames,
    registration: new RegistrationService(db, users, inviteCodes, reservedNames, mail),
    setup: new SetupService(db, domains, users, settings, options.installationSecret),
  };
  return { ...services, admin: new AdminService({ ...services, db }) };
}
