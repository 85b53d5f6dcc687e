/**
 * Small SMTP, LMTP and IMAP clients over node:net for the mail-host tests: enough of each protocol
 * to see every reply code the servers give, which a full client library would turn into exceptions.
 */
import { randomBytes } from "node:crypto";
import { existsSync, readdirSync } from "node:fs";
import { connect, type Socket } from "node:net";
import { join } from "node:path";
import { connect as tlsConnect } from "node:tls";

/** Reads CRLF lines from a socket; `raw(n)` takes n bytes as they come (IMAP literals). */
class LineReader {
  private buffer = Buffer.alloc(0);
  private waiting: (() => void) | null = null;
  private failure: Error | null = null;

  constructor(socket: Socket) {
    socket.on("data", (chunk: Buffer) => {
      this.buffer = Buffer.concat([this.buffer, chunk]);
      this.wake();
    });
    socket.on("error", (error) => {
      this.failure = error;
      this.wake();
    });
    socket.on("close", () => {
      this.failure ??= new Error("connection closed");
      this.wake();
    });
  }

  private wake(): void {
    const waiting = this.waiting;
    this.waiting = null;
    waiting?.();
  }

  private async more(): Promise<void> {
    if (this.failure) throw this.failure;
    await new Promise<void>((resolve) => {
      this.waiting = resolve;
    });
  }

  async line(): Promise<string> {
    for (;;) {
      const end = this.buffer.indexOf("\r\n");
      if (end >= 0) {
        const line = this.buffer.subarray(0, end).toString("utf8");
        this.buffer = this.buffer.subarray(end + 2);
        return line;
      }
      await this.more();
    }
  }

  async raw(length: number): Promise<string> {
    while (this.buffer.length < length) await this.more();
    const data = this.buffer.subarray(0, length).toString("utf8");
    this.buffer = this.buffer.subarray(length);
    return data;
  }
}

async function open(port: number, timeoutMs: number): Promise<Socket> {
  const socket = connect({ host: "127.0.0.1", port });
  socket.setTimeout(timeoutMs, () => socket.destroy(new Error(`no answer within ${timeoutMs} ms`)));
  await new Promise<void>((resolve, reject) => {
    socket.once("connect", resolve);
    socket.once("error", reject);
  });
  return socket;
}

export interface Reply {
  code: number;
  /** All lines of the reply, codes included, joined by newlines. */
  text: string;
}

/** An SMTP or LMTP session (the protocols share their reply format). */
export class SmtpSession {
  private socket: Socket;
  private reader: LineReader;
  readonly greeting: Reply;

  private constructor(socket: Socket, reader: LineReader, greeting: Reply) {
    this.socket = socket;
    this.reader = reader;
    this.greeting = greeting;
  }

  static async open(port: number, timeoutMs = 20_000): Promise<SmtpSession> {
    const socket = await open(port, timeoutMs);
    const reader = new LineReader(socket);
    const session = new SmtpSession(socket, reader, { code: 0, text: "" });
    (session as { greeting: Reply }).greeting = await session.reply();
    return session;
  }

  private async reply(): Promise<Reply> {
    const lines: string[] = [];
    for (;;) {
      const line = await this.reader.line();
      lines.push(line);
      if (line.length < 4 || line[3] !== "-")
        return { code: Number(line.slice(0, 3)), text: lines.join("\n") };
    }
  }

  async command(line: string): Promise<Reply> {
    this.socket.write(`${line}\r\n`);
    return this.reply();
  }

  /** DATA and the message; LMTP answers once per accepted recipient (`replies`). */
  async data(message: string, replies = 1): Promise<Reply[]> {
    const start = await this.command("DATA");
    if (start.code !== 354) return [start];
    const body = message.replace(/\r?\n/g, "\r\n").replace(/^\./gm, "..");
    this.socket.write(`${body}${body.endsWith("\r\n") ? "" : "\r\n"}.\r\n`);
    const answers: Reply[] = [];
    for (let i = 0; i < replies; i++) answers.push(await this.reply());
    return answers;
  }

  /** STARTTLS, then the session goes on encrypted (the test host's certificate is self-signed). */
  async startTls(): Promise<Reply> {
    const answer = await this.command("STARTTLS");
    if (answer.code !== 220) return answer;
    const secure = tlsConnect({
      socket: this.socket,
      rejectUnauthorized: false,
      servername: "mx.mail-host.test",
    });
    await new Promise<void>((resolve, reject) => {
      secure.once("secureConnect", resolve);
      secure.once("error", reject);
    });
    this.socket = secure;
    this.reader = new LineReader(secure);
    return answer;
  }

  async authPlain(user: string, password: string): Promise<Reply> {
    return this.command(`AUTH PLAIN ${Buffer.from(`\0${user}\0${password}`).toString("base64")}`);
  }

  async close(): Promise<void> {
    try {
      await this.command("QUIT");
    } catch {
      // already closed by the server
    }
    this.socket.destroy();
  }
}

export interface ImapResult {
  status: "OK" | "NO" | "BAD";
  /** The tagged line without the tag. */
  text: string;
  /** Untagged lines and literals before it. */
  untagged: string;
}

function quoted(value: string): string {
  return `"${value.replace(/["\\]/g, (c) => `\\${c}`)}"`;
}

export class ImapSession {
  private tag = 0;
  private readonly socket: Socket;
  private readonly reader: LineReader;
  readonly greeting: string;

  private constructor(socket: Socket, reader: LineReader, greeting: string) {
    this.socket = socket;
    this.reader = reader;
    this.greeting = greeting;
  }

  static async open(port: number, timeoutMs = 20_000): Promise<ImapSession> {
    const socket = await open(port, timeoutMs);
    const reader = new LineReader(socket);
    return new ImapSession(socket, reader, await reader.line());
  }

  async command(command: string): Promise<ImapResult> {
    const tag = `t${++this.tag}`;
    this.socket.write(`${tag} ${command}\r\n`);
    const untagged: string[] = [];
    for (;;) {
      let line = await this.reader.line();
      // A literal {n} at the end of a line: its n bytes follow, then the rest of the line.
      for (let literal = /\{(\d+)\}$/.exec(line); literal; literal = /\{(\d+)\}$/.exec(line)) {
        line = `${line}\n${await this.reader.raw(Number(literal[1]))}${await this.reader.line()}`;
      }
      if (line.startsWith(`${tag} `)) {
        const text = line.slice(tag.length + 1);
        return {
          status: text.slice(0, text.indexOf(" ")) as ImapResult["status"],
          text,
          untagged: untagged.join("\n"),
        };
      }
      untagged.push(line);
    }
  }

  login(user: string, password: string): Promise<ImapResult> {
    return this.command(`LOGIN ${quoted(user)} ${quoted(password)}`);
  }

  async close(): Promise<void> {
    try {
      await this.command("LOGOUT");
    } catch {
      // already closed by the server
    }
    this.socket.destroy();
  }
}

/** Signs in, reads every message of INBOX (full text, in order), signs out. */
export async function readInbox(port: number, user: string, password: string): Promise<string[]> {
  const imap = await ImapSession.open(port);
  try {
    const login = await imap.login(user, password);
    if (login.status !== "OK") throw new Error(`login of ${user} refused: ${login.text}`);
    const select = await imap.command("SELECT INBOX");
    if (select.status !== "OK") throw new Error(`SELECT: ${select.text}`);
    if (/^\* 0 EXISTS$/m.test(select.untagged)) return [];
    const fetch = await imap.command("FETCH 1:* (BODY.PEEK[])");
    if (fetch.status !== "OK") throw new Error(`FETCH: ${fetch.text}`);
    return fetch.untagged.split(/^\* \d+ FETCH /m).filter((part) => part !== "");
  } finally {
    await imap.close();
  }
}

/** A message with a unique marker in its subject and body, so a test finds exactly its own mail. */
export function message(from: string, to: string, marker: string): string {
  return [
    `From: <${from}>`,
    `To: <${to}>`,
    `Subject: ${marker}`,
    `Message-ID: <${marker}@mail-host.test>`,
    "",
    `body of ${marker}`,
    "",
  ].join("\r\n");
}

/** A marker no other test writes: `label-<12 hex digits>`. */
export function marker(label: string): string {
  return `${label}-${randomBytes(6).toString("hex")}`;
}

/** The stored message files of a user's INBOX (Maildir new/ and cur/) under Dovecot's mail root. */
export function storedMessages(mailRoot: string, email: string): string[] {
  const [local, domain] = email.split("@") as [string, string];
  const maildir = join(mailRoot, domain, local, "Maildir");
  return ["new", "cur"].flatMap((sub) =>
    existsSync(join(maildir, sub))
      ? readdirSync(join(maildir, sub)).map((name) => join(maildir, sub, name))
      : [],
  );
}

/** LMTP straight to Dovecot: the answer to the one recipient. */
export async function lmtpDeliver(
  port: number,
  to: string,
  text: string,
): Promise<{ rcpt: number; data: number; text: string }> {
  const session = await SmtpSession.open(port);
  try {
    await session.command("LHLO test.client");
    const from = await session.command("MAIL FROM:<sender@sender.test>");
    if (from.code !== 250) return { rcpt: 0, data: 0, text: from.text };
    const rcpt = await session.command(`RCPT TO:<${to}>`);
    if (rcpt.code !== 250) return { rcpt: rcpt.code, data: 0, text: rcpt.text };
    const [data] = await session.data(text);
    return { rcpt: rcpt.code, data: data?.code ?? 0, text: data?.text ?? "" };
  } finally {
    await session.close();
  }
}

/** Submission with STARTTLS and SMTP AUTH: the first reply that is not a success, or the last one. */
export async function submitMessage(
  port: number,
  login: string,
  password: string,
  from: string,
  to: string,
  text: string,
): Promise<{ stage: string; code: number; text: string }> {
  const session = await SmtpSession.open(port);
  try {
    await session.command("EHLO client.sender.test");
    const tls = await session.startTls();
    if (tls.code !== 220) return { stage: "STARTTLS", code: tls.code, text: tls.text };
    await session.command("EHLO client.sender.test");
    const steps: [string, () => Promise<{ code: number; text: string }>][] = [
      ["AUTH", () => session.authPlain(login, password)],
      ["MAIL", () => session.command(`MAIL FROM:<${from}>`)],
      ["RCPT", () => session.command(`RCPT TO:<${to}>`)],
      ["DATA", async () => (await session.data(text))[0] ?? { code: 0, text: "no answer" }],
    ];
    let last = { stage: "", code: 0, text: "" };
    for (const [stage, step] of steps) {
      const reply = await step();
      last = { stage, code: reply.code, text: reply.text };
      if (reply.code >= 400) return last;
    }
    return last;
  } finally {
    await session.close();
  }
}
