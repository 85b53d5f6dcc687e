import { createHash } from "node:crypto";
import type { Kysely } from "kysely";
import { type CryptoLane, cryptoAbandoned, withCryptoContext } from "../credentials/crypto-pool.ts";
import { type Keyed, type KeyedRead, type KeyReader, keyedRead, kyselyKeyReader } from "../db/key-reads.ts";
import type { Database } from "../db/schema.ts";
import { clientGroup } from "./client-address.ts";
import { nowSeconds } from "./users.ts";

/**
 * The one guard every check of a secret passes through, at every door (docs/security.md states the
 * whole policy). Before the expensive check runs, the attempt is counted in the database (shared by
 * every instance) as if it failed, under a lease that lets one check at a time run per untrusted
 * client and per account; a right secret refunds the count. So parallel guesses get no more verdicts
 * than sequential ones, and the counters hold across instances.
 *
 * - A client is an IPv4 address, an IPv6 /64, a web device (a long-lived cookie of a browser that
 *   signed in before), or, at a door whose client sends no address, that door for that account.
 * - Each client has its own counter per kind of secret: a few free failures, then a doubling delay.
 *   An attacker's failures never delay another client: no lock-out of the owner.
 * - Each account has a ceiling of failures per day over all clients it has not seen before; past it,
 *   only clients that signed in before may try, and the owner is told once (`onCeiling`).
 * - Unknown accounts are counted exactly like existing ones, so the answers do not tell them apart.
 */
export type SecretKind = "password" | "app_password" | "second_factor" | "recovery_token" | "invite_code";

/** Where a check comes from: the door names the client and decides the crypto pool's lane. */
export type Door = "web" | "passdb" | "mta_auth" | "webmail" | "identity" | "console";

export interface GuardPolicy {
  /** Failures allowed before any delay. */
  freeFailures: number;
  /** The first delay in seconds; it doubles with each further failure. */
  firstDelay: number;
  maxDelay: number;
  /** A counter with no failure for this long starts again from zero. */
  forgetAfter: number;
}

/** One client's failures with one kind of secret (across accounts). */
export const clientPolicy: GuardPolicy = { freeFailures: 5, firstDelay: 5, maxDelay: 300, forgetAfter: 3600 };
/** One account's failures in a day from clients it has not seen sign in (the ceiling). */
export const accountCeiling: GuardPolicy = {
  freeFailures: 20,
  firstDelay: 86_400,
  maxDelay: 86_400,
  forgetAfter: 86_400,
};
/** A check holds its lease at most this long (a crashed instance's lease lapses). */
export const leaseMilliseconds = 30_000;
/** How long an attempt waits on this instance for the one before it on the same counter. */
export const lineWaitMilliseconds = 5_000;
/** How long a client stays trusted after its last successful sign-in. */
export const trustSeconds = 180 * 86_400;

export const delayAfter = (policy: GuardPolicy, failures: number): number =>
  failures < policy.freeFailures
    ? 0
    : Math.min(policy.maxDelay, policy.firstDelay * 2 ** (failures - policy.freeFailures));

export interface GuardClient {
  /** The client's IP address as the door knows it (validated by the door). */
  address?: string | undefined;
  /** The web's device cookie value, when the browser sent one. */
  device?: string | undefined;
}

export interface Attempt {
  kind: SecretKind;
  door: Door;
  /** The account the secret is checked for (as typed: unknown ones count alike); null for invite codes. */
  account: string | null;
  client: GuardClient;
  /** Fires when the client has gone: queued crypto work for it is dropped. */
  signal?: AbortSignal | undefined;
}

/** Where a check of a secret comes from, as a door tells a service. */
export interface CheckOrigin {
  /** The door; it decides the crypto pool's lane. Default: the console (no client). */
  door?: Door;
  /** The client as the door knows it: its IP address, the web's device cookie. */
  client?: GuardClient;
  /** Fires when the client has gone: its queued crypto work is dropped (`crypto.abandoned`). */
  signal?: AbortSignal | undefined;
}

export type Guarded<T> =
  | { outcome: "throttled"; retryAfter: number }
  | { outcome: "wrong"; value: T }
  /** `trusted`: the client had signed in to the account before this attempt. */
  | { outcome: "right"; value: T; trusted: boolean };

/** What a check tells the guard: whether the secret was right, and what the door needs of it. */
export interface Verdict<T> {
  right: boolean;
  value: T;
  /**
   * A right secret whose client is not to be trusted for it (default: trusted): the account password
   * refused at IMAP where app passwords are required is right, so not counted, yet no reason to trust.
   */
  trust?: boolean;
}

/**
 * The key a client is trusted under: an app password's success (a printer's SMTP-only one, say)
 * never makes its address trusted for the account password, nor the other way round.
 */
const trustKey = (kind: SecretKind, client: string): string =>
  kind === "app_password" ? `app:${client}` : client;

interface Reservation {
  subject: string;
  lease: number;
}

const laneOf: Record<Door, CryptoLane> = {
  passdb: "mail",
  mta_auth: "mail",
  web: "interactive",
  webmail: "interactive",
  identity: "interactive",
  console: "mail",
};

/** Doors whose clients are trusted by address (IMAP and SMTP clients keep their address a while). */
const trustsAddress: Record<Door, boolean> = {
  passdb: true,
  mta_auth: true,
  webmail: true,
  identity: true,
  web: false,
  console: false,
};

/** A device is kept as a hash: a stolen database does not hand out trusted device cookies. */
const deviceKey = (device: string) => `d:${createHash("sha256").update(device).digest("base64url")}`;

const normalAccount = (account: string) => account.trim().toLowerCase().slice(0, 254);

export interface GuardOptions {
  /** The account's ceiling was reached in this window (once per window): tell the owner. */
  onCeiling?: (account: string, kind: SecretKind) => Promise<void>;
  /** A failure of `onCeiling` (it never changes the answer). */
  onError?: (error: unknown) => void;
  /** How `attemptCheap` reads (the database's keyed reads, db/key-reads.ts); through Kysely otherwise. */
  keyReader?: <Row extends Keyed>(read: KeyedRead<Row>) => KeyReader<Row>;
}

const countersBySubject = keyedRead((db, keys) =>
  db.selectFrom("sign_in_failures").select(["subject as lookup_key", "blocked_until"]).where(keys("subject")),
);
const trustedByAccount = keyedRead((db, keys) =>
  db
    .selectFrom("trusted_clients")
    .select(["account as lookup_key", "client", "last_success_at"])
    .where(keys("account")),
);

/** The guard's attempt for a check of `kind` from `origin` (the console when nothing is said). */
export const attemptFrom = (kind: SecretKind, account: string | null, origin: CheckOrigin): Attempt => ({
  kind,
  door: origin.door ?? "console",
  account,
  client: origin.client ?? {},
  signal: origin.signal,
});

export class SignInGuard {
  readonly #db: Kysely<Database>;
  readonly #options: GuardOptions;
  /** The last attempt in line per counter on this instance (see #inLine). */
  readonly #lines = new Map<string, Promise<void>>();
  readonly #counters: KeyReader<{ lookup_key: string; blocked_until: number }>;
  readonly #trustedOf: KeyReader<{ lookup_key: string; client: string; last_success_at: number }>;

  constructor(db: Kysely<Database>, options: GuardOptions = {}) {
    this.#db = db;
    this.#options = options;
    const reader = options.keyReader ?? ((read) => kyselyKeyReader(db, read));
    this.#counters = reader(countersBySubject);
    this.#trustedOf = reader(trustedByAccount);
  }

  /**
   * The guard for a check that is cheap and that guessing cannot win (an app password: 81 random
   * bits), on the mail server's hot path: checked first, then only a failure is counted, on the
   * client's counter with the same delays as `attempt` (no account ceiling). A client already held back is refused
   * unchecked. A right secret of a trusted client writes nothing (its trust is renewed at most once
   * an hour). Parallel guesses are not held in line: they may all get verdicts before the first
   * failure is counted, which against 2^81 values gains nothing. `check` returns null to hand the
   * attempt to `attempt` (a check that turns out to need the slow work); nothing is counted then.
   */
  async attemptCheap<T>(
    attempt: Attempt,
    check: () => Promise<Verdict<T> | null>,
  ): Promise<Guarded<T> | null> {
    if (attempt.signal?.aborted) throw cryptoAbandoned();
    if (attempt.door === "console" || attempt.client.device) return null;
    const now = nowSeconds();
    const kind = attempt.kind;
    const account = attempt.account === null ? null : normalAccount(attempt.account);
    const group = attempt.client.address ? clientGroup(attempt.client.address, "subscriber") : null;
    const client = group === null ? `door:${attempt.door}:${account ?? ""}` : `ip:${group}`;
    let trustedAt: number | null = null;
    if (account !== null && trustsAddress[attempt.door]) {
      const key = trustKey(kind, client);
      const row = (await this.#trustedOf(account)).find((r) => r.client === key);
      if (row && Number(row.last_success_at) > now - trustSeconds) trustedAt = Number(row.last_success_at);
    }
    const trusted = trustedAt !== null;
    const clientSubject = trusted ? `t:${kind}:${client}|${account}` : `c:${kind}:${client}`;
    // No daily ceiling per account here: it stops distributed guessing of secrets a person chose,
    // which these are not, and it would let anyone with 20 addresses lock the owner's roaming
    // phones out for a day. Each client is still held back by its own failures.
    const [row] = await this.#counters(clientSubject);
    const blockedUntil = row ? Number(row.blocked_until) : 0;
    if (blockedUntil > now) return { outcome: "throttled", retryAfter: blockedUntil - now };
    const verdict = await withCryptoContext({ lane: laneOf[attempt.door], signal: attempt.signal }, check);
    if (verdict === null) return null;
    if (verdict.right) {
      if (
        account !== null &&
        trustsAddress[attempt.door] &&
        verdict.trust !== false &&
        (trustedAt === null || trustedAt <= now - 3600)
      )
        await this.#trust(account, trustKey(kind, client), now);
      return { outcome: "right", value: verdict.value, trusted };
    }
    await this.#reserve(clientSubject, clientPolicy, now, false);
    return { outcome: "wrong", value: verdict.value };
  }

  /**
   * Runs `check` under the guard: throttled (unchecked) or a verdict. A fault of the check (the
   * database, a full crypto queue, a client that left) refunds the attempt and is thrown on.
   */
  async attempt<T>(attempt: Attempt, check: () => Promise<Verdict<T>>): Promise<Guarded<T>> {
    // The client has gone already (a flood of abandoned requests): no work, nothing counted.
    if (attempt.signal?.aborted) throw cryptoAbandoned();
    if (attempt.door === "console") {
      // The operator at the console holds the database already: nothing to guess, nothing counted.
      const verdict = await withCryptoContext({ lane: "mail" }, check);
      return verdict.right
        ? { outcome: "right", value: verdict.value, trusted: false }
        : { outcome: "wrong", value: verdict.value };
    }
    const account = attempt.account === null ? null : normalAccount(attempt.account);
    const { client, trusted } = await this.#client(attempt, account);
    const kind = attempt.kind;
    const clientSubject = trusted ? `t:${kind}:${client}|${account}` : `c:${kind}:${client}`;
    const accountSubject = account === null ? null : `a:${kind}:${account}`;
    // Attempts of one client (and of one account, from clients it has not seen) wait their turn
    // here rather than be refused by the lease: a phone's IMAP connections opened at once all get
    // an answer. A trusted client never waits behind others' attempts on its account.
    const line = trusted || accountSubject === null ? [clientSubject] : [clientSubject, accountSubject];
    return this.#inLine(line, () => this.#attempt(attempt, account, client, trusted, check));
  }

  async #attempt<T>(
    attempt: Attempt,
    account: string | null,
    client: string,
    trusted: boolean,
    check: () => Promise<Verdict<T>>,
  ): Promise<Guarded<T>> {
    if (attempt.signal?.aborted) throw cryptoAbandoned();
    const now = nowSeconds();
    const kind = attempt.kind;
    const reservations: Reservation[] = [];
    const release = () => Promise.all(reservations.map((r) => this.#release(r)));
    const refund = () => Promise.all(reservations.map((r) => this.#refund(r)));

    // Trusted clients take no lease: across instances their parallel sign-ins do not refuse each other.
    // A trusted client counts its own failures on this account only: a neighbour behind the same
    // address failing elsewhere never holds it back.
    const clientSubject = trusted ? `t:${kind}:${client}|${account}` : `c:${kind}:${client}`;
    const clientReservation = await this.#reserve(clientSubject, clientPolicy, now, !trusted);
    if ("retryAfter" in clientReservation)
      return { outcome: "throttled", retryAfter: clientReservation.retryAfter };
    reservations.push(clientReservation);
    if (account !== null && !trusted) {
      const ceiling = await this.#reserve(`a:${kind}:${account}`, accountCeiling, now, true);
      if ("retryAfter" in ceiling) {
        await refund();
        return { outcome: "throttled", retryAfter: ceiling.retryAfter };
      }
      reservations.push(ceiling);
    }

    let verdict: Verdict<T>;
    try {
      verdict = await withCryptoContext({ lane: laneOf[attempt.door], signal: attempt.signal }, check);
    } catch (error) {
      await refund().catch(() => {});
      throw error;
    }
    if (verdict.right) {
      await refund();
      const trusts = client.startsWith("d:") || trustsAddress[attempt.door];
      if (account !== null && trusts && verdict.trust !== false)
        await this.#trust(account, trustKey(kind, client), now);
      return { outcome: "right", value: verdict.value, trusted };
    }
    await release();
    if (account !== null && !trusted) await this.#afterFailure(account, kind, now);
    return { outcome: "wrong", value: verdict.value };
  }

  /**
   * Runs `work` once every earlier attempt on these counters on this instance has finished (at most
   * `lineWaitMilliseconds`; then it runs anyway, and the database lease decides). Instances share
   * nothing here: across instances the lease refuses a second check in flight.
   */
  async #inLine<T>(subjects: string[], work: () => Promise<T>): Promise<T> {
    const ahead = subjects.flatMap((subject) => this.#lines.get(subject) ?? []);
    let finished!: () => void;
    const mine = new Promise<void>((resolve) => {
      finished = resolve;
    });
    for (const subject of subjects) this.#lines.set(subject, mine);
    try {
      if (ahead.length > 0) {
        let timer: NodeJS.Timeout | undefined;
        await Promise.race([
          Promise.all(ahead),
          new Promise((resolve) => {
            timer = setTimeout(resolve, lineWaitMilliseconds);
          }),
        ]);
        clearTimeout(timer);
      }
      return await work();
    } finally {
      finished();
      for (const subject of subjects) if (this.#lines.get(subject) === mine) this.#lines.delete(subject);
    }
  }

  /** Counters and trusts nobody has used for a while; run by the cleanup job. */
  async forgetOld(now = nowSeconds()): Promise<number> {
    const counters = await this.#db
      .deleteFrom("sign_in_failures")
      .where("last_failure_at", "<", now - accountCeiling.forgetAfter)
      .where("blocked_until", "<", now)
      .where("busy_until", "<", now * 1000)
      .executeTakeFirst();
    const trusts = await this.#db
      .deleteFrom("trusted_clients")
      .where("last_success_at", "<", now - trustSeconds)
      .executeTakeFirst();
    return Number(counters.numDeletedRows) + Number(trusts.numDeletedRows);
  }

  /** The client key of an attempt, and whether it signed in to the account before. */
  async #client(attempt: Attempt, account: string | null): Promise<{ client: string; trusted: boolean }> {
    // Invite codes have no account and so no ceiling: their clients are counted by wider networks.
    const width = attempt.kind === "invite_code" ? "network" : "subscriber";
    const group = attempt.client.address ? clientGroup(attempt.client.address, width) : null;
    if (account !== null && attempt.client.device) {
      const device = deviceKey(attempt.client.device);
      if (await this.#isTrusted(account, device)) return { client: device, trusted: true };
    }
    // No address: the door is a client of its own, per account (never "everyone"). Once the owner
    // signed in through it, it is trusted like an address: the daily ceiling never locks the owner
    // out there (whoever else comes through that door shares its counter: send the address).
    const client = group === null ? `door:${attempt.door}:${account ?? ""}` : `ip:${group}`;
    const trusted =
      account !== null &&
      trustsAddress[attempt.door] &&
      (await this.#isTrusted(account, trustKey(attempt.kind, client)));
    return { client, trusted };
  }

  async #isTrusted(account: string, client: string): Promise<boolean> {
    const row = await this.#db
      .selectFrom("trusted_clients")
      .select("last_success_at")
      .where("account", "=", account)
      .where("client", "=", client)
      .executeTakeFirst();
    return row !== undefined && Number(row.last_success_at) > nowSeconds() - trustSeconds;
  }

  async #trust(account: string, client: string, now: number): Promise<void> {
    const updated = await this.#db
      .updateTable("trusted_clients")
      .set({ last_success_at: now })
      .where("account", "=", account)
      .where("client", "=", client)
      .where("last_success_at", "<", now - 3600)
      .executeTakeFirst();
    if (Number(updated.numUpdatedRows) > 0) return;
    try {
      await this.#db
        .insertInto("trusted_clients")
        .values({ account, client, last_success_at: now })
        .execute();
    } catch {
      // Already trusted (recently, or by a parallel sign-in): nothing to add.
    }
  }

  /** Trust a web device for an account (the web calls this once the whole sign-in succeeded). */
  async trustDevice(account: string, device: string): Promise<void> {
    await this.#trust(normalAccount(account), deviceKey(device), nowSeconds());
  }

  /**
   * Counts one attempt on `subject` unless its delay or a lease holds it back: one conditional
   * statement, so parallel attempts cannot all pass a check made before any of them was counted.
   */
  async #reserve(
    subject: string,
    policy: GuardPolicy,
    now: number,
    exclusive: boolean,
  ): Promise<Reservation | { retryAfter: number }> {
    const nowMs = Date.now();
    const lease = exclusive ? nowMs + leaseMilliseconds : 0;
    const stale = now - policy.forgetAfter;
    for (let attempt = 0; attempt < 3; attempt++) {
      const updated = await this.#db
        .updateTable("sign_in_failures")
        .set((eb) => {
          const counted = eb
            .case()
            .when("last_failure_at", "<", stale)
            .then(1)
            .else(eb("failures", "+", 1))
            .end();
          // MariaDB assigns left to right, each assignment seeing the ones before it: the block is
          // computed first, from the row as it was, as PostgreSQL and SQLite always do.
          return {
            // Blocks at once when this attempt reaches the free failures; #settle raises it exactly.
            blocked_until: eb
              .case()
              .when(counted, ">=", policy.freeFailures)
              .then(now + policy.firstDelay)
              .else(0)
              .end(),
            failures: counted,
            last_failure_at: now,
            ...(exclusive ? { busy_until: lease } : {}),
          };
        })
        .where("subject", "=", subject)
        .where((eb) =>
          eb.and([
            ...(exclusive ? [eb("busy_until", "<", nowMs)] : []),
            eb.or([
              eb("last_failure_at", "<", stale),
              eb("failures", "<", policy.freeFailures),
              eb("blocked_until", "<=", now),
            ]),
          ]),
        )
        .executeTakeFirst();
      if (Number(updated.numUpdatedRows) === 1) {
        await this.#settle(subject, policy, now);
        return { subject, lease };
      }
      const row = await this.#row(subject);
      if (row) return { retryAfter: Math.max(1, this.#blockedFor(row, policy, now, nowMs)) };
      try {
        await this.#db
          .insertInto("sign_in_failures")
          .values({
            subject,
            failures: 1,
            last_failure_at: now,
            blocked_until: now + delayAfter(policy, 1),
            busy_until: lease,
          })
          .execute();
        return { subject, lease };
      } catch {
        // Another attempt inserted it first: go again through the conditional update.
      }
    }
    return { retryAfter: 1 };
  }

  /** Raises the block to the exact delay of the count just reached. */
  async #settle(subject: string, policy: GuardPolicy, now: number): Promise<void> {
    const row = await this.#row(subject);
    if (!row) return;
    const blockedUntil = now + delayAfter(policy, Number(row.failures));
    if (blockedUntil <= now) return;
    await this.#db
      .updateTable("sign_in_failures")
      .set({ blocked_until: blockedUntil })
      .where("subject", "=", subject)
      .where("blocked_until", "<", blockedUntil)
      .execute();
  }

  #blockedFor(
    row: { failures: number; last_failure_at: number; blocked_until: number; busy_until: number },
    policy: GuardPolicy,
    now: number,
    nowMs: number,
  ): number {
    if (Number(row.last_failure_at) < now - policy.forgetAfter) return Number(row.busy_until) > nowMs ? 1 : 0;
    const blocked = Number(row.failures) >= policy.freeFailures ? Number(row.blocked_until) - now : 0;
    const busy = Number(row.busy_until) > nowMs ? Math.ceil((Number(row.busy_until) - nowMs) / 1000) : 0;
    return Math.max(blocked, Math.min(busy, 1));
  }

  #row(subject: string) {
    return this.#db
      .selectFrom("sign_in_failures")
      .select(["failures", "last_failure_at", "blocked_until", "busy_until"])
      .where("subject", "=", subject)
      .executeTakeFirst();
  }

  /** The check failed: the count stays, the lease ends. */
  async #release(reservation: Reservation): Promise<void> {
    if (reservation.lease === 0) return;
    await this.#db
      .updateTable("sign_in_failures")
      .set({ busy_until: 0 })
      .where("subject", "=", reservation.subject)
      .where("busy_until", "=", reservation.lease)
      .execute();
  }

  /** The secret was right (or never checked): the attempt is taken back and its lease ends. */
  async #refund(reservation: Reservation): Promise<void> {
    await this.#db
      .updateTable("sign_in_failures")
      .set((eb) => ({
        failures: eb
          .case()
          .when("failures", ">", 0)
          .then(eb("failures", "-", 1))
          .else(0)
          .end(),
      }))
      .where("subject", "=", reservation.subject)
      .execute();
    await this.#release(reservation);
  }

  /** Tells the owner once per window when this failure filled the account's ceiling. */
  async #afterFailure(account: string, kind: SecretKind, now: number): Promise<void> {
    if (!this.#options.onCeiling) return;
    const row = await this.#row(`a:${kind}:${account}`);
    if (!row || Number(row.failures) < accountCeiling.freeFailures) return;
    try {
      // One marker row per window: only the statement that creates or renews it tells the owner.
      const renewed = await this.#db
        .updateTable("sign_in_failures")
        .set({ last_failure_at: now, blocked_until: now + accountCeiling.forgetAfter })
        .where("subject", "=", `n:${kind}:${account}`)
        .where("blocked_until", "<", now)
        .executeTakeFirst();
      if (Number(renewed.numUpdatedRows) === 0)
        await this.#db
          .insertInto("sign_in_failures")
          .values({
            subject: `n:${kind}:${account}`,
            failures: 1,
            last_failure_at: now,
            blocked_until: now + accountCeiling.forgetAfter,
            busy_until: 0,
          })
          .execute();
    } catch {
      return;
    }
    try {
      await this.#options.onCeiling(account, kind);
    } catch (error) {
      this.#options.onError?.(error);
    }
  }
}
