/**
 * An authentication server speaking Dovecot's authentication protocol (client side of
 * doc.dovecot.org "Dovecot Authentication Protocol", v1.x), the one Postfix uses with
 * `smtpd_sasl_type = dovecot` and `smtpd_sasl_path = inet:127.0.0.1:10002`. Mechanisms PLAIN and
 * LOGIN; every password is checked by POST /api/mta/auth.
 *
 *   S: VERSION 1 2 / MECH PLAIN plaintext / MECH LOGIN plaintext / SPID / CUID / COOKIE / DONE
 *   C: VERSION 1 x / CPID <pid>
 *   C: AUTH <id> PLAIN service=smtp nologin lip=.. rip=.. [secured] [resp=<base64>]
 *   S: CONT <id> <base64 challenge>   C: CONT <id> <base64 response>
 *   S: OK <id> user=<login>   |   S: FAIL <id> user=<login> [temp] [reason=<text>]
 *
 * (fields separated by TAB, lines ended by LF). It fails closed: when the service cannot answer,
 * the sign-in fails with the `temp` flag (Postfix answers 454, "try again later"), never succeeds.
 * The SMTP client's address (`rip`) goes to the service as X-Client-Address, for the service's
 * throttling of repeated failures. Protocol violations (a line before the handshake, an unknown
 * command, a malformed AUTH, a reused request id, a line over 16 KiB) close that connection, as
 * Dovecot's auth server does; a bad request inside a well-formed line (unknown mechanism, invalid
 * base64 or PLAIN data) gets FAIL and the connection stays.
 */
import { randomBytes } from "node:crypto";
import type { Socket } from "node:net";
import type { Logger } from "pino";
import type { Metrics } from "./metrics.ts";
import { type AuthVerdict, type ServiceClient, ServiceUnavailable } from "./service-client.ts";
import { Listener } from "./tcp.ts";

const MAJOR_VERSION = 1;
const MINOR_VERSION = 2;
/** Dovecot expects lines to fit into 16 KiB; longer is not a client of this protocol. */
export const MAX_LINE_BYTES = 16 * 1024;
/** Authentications one connection may have waiting for the service at once. */
const MAX_ACTIVE_REQUESTS = 32;
/** The client must complete its handshake within this time. */
const HANDSHAKE_TIMEOUT_MS = 30_000;

const MECHANISMS = ["PLAIN", "LOGIN"] as const;
type Mechanism = (typeof MECHANISMS)[number];

const USERNAME_CHALLENGE = Buffer.from("Username:").toString("base64");
const PASSWORD_CHALLENGE = Buffer.from("Password:").toString("base64");

interface Request {
  mechanism: Mechanism;
  step: "plain" | "login-username" | "login-password" | "verifying";
  username?: string;
  clientAddress?: string;
}

export interface SaslOptions {
  client: ServiceClient;
  logger: Logger;
  metrics: Metrics;
  maxConnections?: number;
}

const ESCAPE = "\x01";

/** Dovecot's tab-escaping: \x01 followed by 0, 1, t, r, n or l (LF) stands for that character. */
export function unescapeValue(value: string): string {
  if (!value.includes(ESCAPE)) return value;
  const map: Record<string, string> = { "0": "\0", "1": ESCAPE, t: "\t", r: "\r", n: "\n", l: "\n" };
  let out = "";
  for (let i = 0; i < value.length; i++) {
    const char = value[i] as string;
    if (char !== ESCAPE) {
      out += char;
    } else if (i + 1 < value.length) {
      i += 1;
      out += map[value[i] as string] ?? value[i];
    }
  }
  return out;
}

/** Strict base64 (the alphabet, padding only at the end, whole quanta); "" is valid. */
function isBase64(text: string): boolean {
  return text.length % 4 === 0 && /^[A-Za-z0-9+/]*={0,2}$/.test(text);
}

const utf8 = new TextDecoder("utf-8", { fatal: true });

function decodeText(bytes: Buffer): string | null {
  try {
    return utf8.decode(bytes);
  } catch {
    return null;
  }
}

/** A login we can pass to the service and name in `user=`: no control characters, sane length. */
function usableLogin(login: string): boolean {
  if (login === "" || login.length > 1024) return false;
  for (let i = 0; i < login.length; i++) {
    const code = login.charCodeAt(i);
    if (code < 0x20 || code === 0x7f) return false;
  }
  return true;
}

let connectionCounter = 0;

export function createSaslListener(options: SaslOptions): Listener {
  const { client, logger, metrics } = options;
  const cookie = randomBytes(16).toString("hex");

  return new Listener({
    name: "sasl",
    metrics,
    logger,
    maxConnections: options.maxConnections ?? 1000,
    // Postfix keeps its connection while smtpd lives and does not expect the server to hang up:
    // a closed idle connection would fail the next sign-in ("Connection lost to authentication server").
    idleTimeoutMs: null,
    open(socket: Socket) {
      connectionCounter += 1;
      const requests = new Map<number, Request>();
      const session = {
        get busy() {
          return [...requests.values()].some((request) => request.step === "verifying");
        },
      };
      let state: "version" | "cpid" | "ready" = "version";
      let closed = false;
      let pending: Buffer = Buffer.alloc(0);

      socket.on("close", () => {
        closed = true;
      });
      const handshakeTimer = setTimeout(
        () => violation("handshake-timeout", "no handshake in time"),
        HANDSHAKE_TIMEOUT_MS,
      );
      handshakeTimer.unref();

      socket.write(
        `VERSION\t${MAJOR_VERSION}\t${MINOR_VERSION}\n` +
          MECHANISMS.map((mechanism) => `MECH\t${mechanism}\tplaintext\n`).join("") +
          `SPID\t${process.pid}\nCUID\t${connectionCounter}\nCOOKIE\t${cookie}\nDONE\n`,
      );

      const send = (line: string) => {
        if (!closed) socket.write(`${line}\n`);
      };

      function violation(kind: string, message: string): void {
        if (closed) return;
        clearTimeout(handshakeTimer);
        metrics.protocolErrors.inc({ listener: "sasl", kind });
        logger.warn(
          { listener: "sasl", remote: socket.remoteAddress, err: message },
          "bad input: closing the connection",
        );
        closed = true;
        socket.destroy();
      }

      const fail = (id: number, mechanism: string, result: "failure" | "tempfail", fields: string[]) => {
        metrics.saslAuthentications.inc({ mechanism, result });
        requests.delete(id);
        send(["FAIL", String(id), ...fields].join("\t"));
      };

      const verify = async (id: number, request: Request, login: string, password: string) => {
        if (!usableLogin(login) || password === "") {
          fail(id, request.mechanism, "failure", ["reason=Authentication failed"]);
          return;
        }
        request.step = "verifying";
        const user = `user=${login.toLowerCase()}`;
        let verdict: AuthVerdict;
        try {
          verdict = await client.authenticate(login, password, request.clientAddress);
        } catch (error) {
          if (!(error instanceof ServiceUnavailable)) {
            logger.error(
              { err: error instanceof Error ? error.message : String(error) },
              "sign-in check failed",
            );
          }
          logger.warn(
            { user: login, remote: request.clientAddress },
            "sign-in refused: account service unavailable",
          );
          fail(id, request.mechanism, "tempfail", [
            user,
            "temp",
            "reason=Temporary authentication failure, try again later",
          ]);
          return;
        }
        if (verdict === "success") {
          metrics.saslAuthentications.inc({ mechanism: request.mechanism, result: "success" });
          requests.delete(id);
          logger.debug({ user: login, remote: request.clientAddress }, "sign-in");
          send(`OK\t${id}\t${user}`);
          return;
        }
        logger.info({ user: login, remote: request.clientAddress, verdict }, "sign-in refused");
        const reason =
          verdict === "disabled"
            ? ["code=user_disabled", "reason=Account disabled"]
            : verdict === "password-change"
              ? ["code=pass_expired", "reason=Password change required"]
              : ["reason=Authentication failed"];
        fail(id, request.mechanism, "failure", [user, ...reason]);
      };

      /** The next step of request `id` with the client's (base64) data. */
      const step = (id: number, request: Request, data: string) => {
        if (!isBase64(data)) {
          fail(id, request.mechanism, "failure", ["reason=Invalid base64 data"]);
          return;
        }
        const bytes = Buffer.from(data, "base64");
        switch (request.step) {
          case "plain": {
            // authzid NUL authcid NUL password; an authzid other than the login would be a master
            // user's sign-in as someone else, which this server does not offer.
            const parts: Buffer[] = [];
            let start = 0;
            for (let i = 0; i <= bytes.length; i++) {
              if (i === bytes.length || bytes[i] === 0) {
                parts.push(bytes.subarray(start, i));
                start = i + 1;
              }
            }
            const [authzid, authcid, password] = parts.map(decodeText);
            if (parts.length !== 3 || authzid == null || authcid == null || password == null) {
              fail(id, request.mechanism, "failure", ["reason=Invalid PLAIN data"]);
            } else if (authzid !== "" && authzid !== authcid) {
              fail(id, request.mechanism, "failure", ["reason=Authentication failed"]);
            } else {
              void verify(id, request, authcid, password);
            }
            return;
          }
          case "login-username": {
            const username = decodeText(bytes);
            if (username === null || username === "") {
              fail(id, request.mechanism, "failure", ["reason=Invalid username"]);
              return;
            }
            request.username = username;
            request.step = "login-password";
            send(`CONT\t${id}\t${PASSWORD_CHALLENGE}`);
            return;
          }
          case "login-password": {
            const password = decodeText(bytes);
            if (password === null) {
              fail(id, request.mechanism, "failure", ["reason=Invalid password data"]);
              return;
            }
            void verify(id, request, request.username ?? "", password);
            return;
          }
          case "verifying":
            violation("cont-while-verifying", `CONT for request ${id} while it is being checked`);
            return;
        }
      };

      const auth = (fields: string[]) => {
        const [, idText, mechanismText] = fields;
        if (idText === undefined || mechanismText === undefined || !/^\d{1,10}$/.test(idText)) {
          violation("malformed-auth", "malformed AUTH");
          return;
        }
        const id = Number(idText);
        if (id > 0xffffffff || requests.has(id)) {
          violation("duplicate-id", `AUTH with an id already in use (${idText})`);
          return;
        }
        let service: string | undefined;
        let clientAddress: string | undefined;
        let response: string | undefined;
        for (const field of fields.slice(3)) {
          // resp= is the last parameter; anything after it is ignored (the protocol says so).
          if (field.startsWith("resp=")) {
            response = field.slice(5);
            break;
          }
          if (field.startsWith("service=")) service = unescapeValue(field.slice(8));
          else if (field.startsWith("rip=")) clientAddress = unescapeValue(field.slice(4));
        }
        if (!service) {
          violation("malformed-auth", "AUTH without service=");
          return;
        }
        const mechanism = mechanismText.toUpperCase();
        if (!(MECHANISMS as readonly string[]).includes(mechanism)) {
          metrics.saslAuthentications.inc({ mechanism: "unsupported", result: "failure" });
          send(`FAIL\t${id}\treason=Unsupported authentication mechanism`);
          return;
        }
        if (requests.size >= MAX_ACTIVE_REQUESTS) {
          metrics.saslAuthentications.inc({ mechanism, result: "tempfail" });
          send(`FAIL\t${id}\ttemp\treason=Too many authentications at once`);
          return;
        }
        const request: Request = {
          mechanism: mechanism as Mechanism,
          step: mechanism === "PLAIN" ? "plain" : "login-username",
          clientAddress,
        };
        requests.set(id, request);
        if (response === undefined || (response === "" && mechanism === "LOGIN")) {
          // No initial response: PLAIN asks with an empty challenge, LOGIN for the user name.
          send(`CONT\t${id}\t${mechanism === "PLAIN" ? "" : USERNAME_CHALLENGE}`);
          return;
        }
        step(id, request, response);
      };

      const line = (text: string) => {
        const fields = text.split("\t");
        const command = fields[0];
        if (state === "version") {
          if (command !== "VERSION" || fields[1] !== String(MAJOR_VERSION)) {
            violation("handshake", `expected VERSION\\t${MAJOR_VERSION}, got "${text.slice(0, 40)}"`);
            return;
          }
          state = "cpid";
          return;
        }
        if (state === "cpid") {
          if (command !== "CPID" || !/^\d+$/.test(fields[1] ?? "")) {
            violation("handshake", `expected CPID, got "${text.slice(0, 40)}"`);
            return;
          }
          state = "ready";
          clearTimeout(handshakeTimer);
          return;
        }
        if (command === "AUTH") {
          auth(fields);
        } else if (command === "CONT") {
          const [, idText, data] = fields;
          if (idText === undefined || data === undefined || !/^\d{1,10}$/.test(idText)) {
            violation("malformed-cont", "malformed CONT");
            return;
          }
          const id = Number(idText);
          const request = requests.get(id);
          if (!request) {
            metrics.saslAuthentications.inc({ mechanism: "unknown", result: "failure" });
            send(`FAIL\t${id}\treason=Authentication request timed out`);
            return;
          }
          step(id, request, data);
        } else {
          violation("unknown-command", `unknown command "${(command ?? "").slice(0, 20)}"`);
        }
      };

      socket.on("data", (chunk: Buffer) => {
        if (closed) return;
        pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk]);
        for (;;) {
          const end = pending.indexOf(0x0a);
          if (end < 0) break;
          if (end > MAX_LINE_BYTES) break;
          const raw = pending.subarray(0, end);
          pending = pending.subarray(end + 1);
          const text = decodeText(raw);
          if (text === null) {
            violation("not-utf8", "a line that is not UTF-8");
            return;
          }
          line(text.endsWith("\r") ? text.slice(0, -1) : text);
          if (closed) return;
        }
        if (pending.length > MAX_LINE_BYTES)
          violation("line-too-long", `a line over ${MAX_LINE_BYTES} bytes`);
      });
      return session;
    },
  });
}
