import { createHash, randomBytes } from "node:crypto";
import type { Kysely } from "kysely";
import { cutoffsOf } from "../accounts/session-lifetimes.ts";
import { decodeSetting, storedSetting } from "../accounts/settings.ts";
import { nowSeconds, toUser, type User } from "../accounts/users.ts";
import type { Database, WebSessionStage } from "../db/schema.ts";
import type { MessageKey } from "../i18n/catalogue.ts";

/** A message shown once on the next page. */
export interface Flash {
  kind: "success" | "info" | "error";
  key: MessageKey;
  params?: Record<string, string | number>;
}

/** What a session carries between pages besides who is signed in. */
export interface SessionData {
  flash?: Flash[];
  /** Pending steps of multi-page flows (2FA enrolment). */
  [step: string]: unknown;
}

export interface WebSession {
  idHash: string;
  user: User;
  stage: WebSessionStage;
  data: SessionData;
  createdAt: number;
  lastSeenAt: number;
}

/** The cookie holds 32 random bytes; the table only their SHA-256. */
export const hashSessionId = (id: string): string => createHash("sha256").update(id).digest("hex");
const newSessionId = () => randomBytes(32).toString("base64url");
const validId = /^[A-Za-z0-9_-]{43}$/;
/** last_seen_at is written at most this often, not on every page view. */
const touchEverySeconds = 60;

/**
 * Web sessions in the database, so every instance knows them and any of them can be ended: by
 * signing out, "sign out everywhere", a password change or reset (accounts/queries.ts
 * endWebSessions, which records the security event), the idle and absolute lifetimes of the
 * settings, or the user's deletion.
 */
export class WebSessions {
  readonly #db: Kysely<Database>;

  constructor(db: Kysely<Database>) {
    this.#db = db;
  }

  async create(
    user: User,
    stage: WebSessionStage,
    meta: { clientAddress?: string; userAgent?: string },
    data: SessionData = {},
  ): Promise<{ id: string; session: WebSession }> {
    const id = newSessionId();
    const idHash = hashSessionId(id);
    const now = nowSeconds();
    await this.#db
      .insertInto("web_sessions")
      .values({
        id_hash: idHash,
        user_id: user.id,
        stage,
        data: JSON.stringify(data),
        client_address: meta.clientAddress?.slice(0, 64) ?? null,
        user_agent: meta.userAgent?.slice(0, 255) ?? null,
        created_at: now,
        last_seen_at: now,
      })
      .execute();
    return { id, session: { idHash, user, stage, data, createdAt: now, lastSeenAt: now } };
  }

  /** The live session of this cookie value, or null (unknown, ended, expired, user gone). */
  async find(id: string | undefined): Promise<WebSession | null> {
    if (!id || !validId.test(id)) return null;
    const idHash = hashSessionId(id);
    const row = await this.#db
      .selectFrom("web_sessions")
      .innerJoin("users", "users.id", "web_sessions.user_id")
      .selectAll("users")
      .select([
        "web_sessions.stage as session_stage",
        "web_sessions.data as session_data",
        "web_sessions.created_at as session_created_at",
        "web_sessions.last_seen_at as session_last_seen_at",
        // The lifetimes in the same statement: one round trip for the check of every page.
        storedSetting(this.#db, "web_session_idle_minutes").as("idle_minutes"),
        storedSetting(this.#db, "web_session_lifetime_hours").as("lifetime_hours"),
      ])
      .where("web_sessions.id_hash", "=", idHash)
      .executeTakeFirst();
    if (!row) return null;
    const now = nowSeconds();
    const { lastSeenAfter, createdAfter } = cutoffsOf(
      {
        web_session_idle_minutes: decodeSetting("web_session_idle_minutes", row.idle_minutes),
        web_session_lifetime_hours: decodeSetting("web_session_lifetime_hours", row.lifetime_hours),
      },
      now,
    );
    const user = toUser(row);
    const createdAt = Number(row.session_created_at);
    const lastSeenAt = Number(row.session_last_seen_at);
    if (user.deleted || lastSeenAt <= lastSeenAfter || createdAt <= createdAfter) {
      await this.end(idHash);
      return null;
    }
    if (now - lastSeenAt >= touchEverySeconds) {
      await this.#db
        .updateTable("web_sessions")
        .set({ last_seen_at: now })
        .where("id_hash", "=", idHash)
        .execute();
    }
    let data: SessionData = {};
    try {
      data = JSON.parse(row.session_data) as SessionData;
    } catch {}
    return { idHash, user, stage: row.session_stage, data, createdAt, lastSeenAt: now };
  }

  /** A new id for the same session (privilege change: second factor passed): the old cookie stops working. */
  async renew(session: WebSession, stage: WebSessionStage): Promise<{ id: string; session: WebSession }> {
    const id = newSessionId();
    const idHash = hashSessionId(id);
    await this.#db
      .updateTable("web_sessions")
      .set({ id_hash: idHash, stage, last_seen_at: nowSeconds() })
      .where("id_hash", "=", session.idHash)
      .execute();
    return { id, session: { ...session, idHash, stage } };
  }

  async save(session: WebSession): Promise<void> {
    await this.#db
      .updateTable("web_sessions")
      .set({ data: JSON.stringify(session.data) })
      .where("id_hash", "=", session.idHash)
      .execute();
  }

  async end(idHash: string): Promise<void> {
    await this.#db.deleteFrom("web_sessions").where("id_hash", "=", idHash).execute();
  }

  async count(userId: number): Promise<number> {
    const row = await this.#db
      .selectFrom("web_sessions")
      .select((eb) => eb.fn.countAll<number>().as("n"))
      .where("user_id", "=", userId)
      .executeTakeFirst();
    return Number(row?.n ?? 0);
  }
}
