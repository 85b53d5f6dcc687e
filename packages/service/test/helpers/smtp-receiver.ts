import { createServer as createNetServer } from "node:net";
import { SMTPServer } from "smtp-server";

/** One message as the relay received it: the envelope, and the parts of the text a test checks. */
export interface ReceivedMail {
  envelopeFrom: string;
  envelopeTo: string[];
  raw: string;
  /** Header names lower-cased, values unfolded and with RFC 2047 words decoded. */
  headers: Map<string, string>;
  subject: string;
  from: string;
  to: string;
  /** The plain-text body, transfer encoding undone. */
  text: string;
}

/**
 * A real local SMTP server (the `smtp-server` package) that keeps what it receives. It can be
 * stopped and started again on the same port, so a test sees the relay go down and come back.
 */
export interface SmtpReceiver {
  url: string;
  port: number;
  received: ReceivedMail[];
  /** Recipients the relay refuses for good (550 at RCPT TO). */
  refuse: Set<string>;
  waitFor(count: number, timeoutMs?: number): Promise<ReceivedMail[]>;
  /** Stops listening (the relay is down); connections then fail with ECONNREFUSED. */
  stop(): Promise<void>;
  /** Listens again on the same port. */
  start(): Promise<void>;
  close(): Promise<void>;
}

export async function startSmtpReceiver(): Promise<SmtpReceiver> {
  const port = await freePort();
  const received: ReceivedMail[] = [];
  const refuse = new Set<string>();
  let server: SMTPServer | null = null;

  const start = async () => {
    const smtp = new SMTPServer({
      // Plain SMTP on loopback: no TLS certificate, no sign-in, as a local relay often is.
      disabledCommands: ["STARTTLS", "AUTH"],
      authOptional: true,
      logger: false,
      onRcptTo(address, _session, callback) {
        if (!refuse.has(address.address)) return callback();
        const error = Object.assign(new Error("mailbox unavailable"), { responseCode: 550 });
        callback(error);
      },
      onData(stream, session, callback) {
        const chunks: Buffer[] = [];
        stream.on("data", (chunk: Buffer) => chunks.push(chunk));
        stream.on("end", () => {
          received.push(parseMail(Buffer.concat(chunks), session.envelope));
          callback();
        });
      },
    });
    await new Promise<void>((resolve, reject) => {
      smtp.server.once("error", reject);
      smtp.listen(port, "127.0.0.1", () => resolve());
    });
    server = smtp;
  };
  const stop = async () => {
    const smtp = server;
    server = null;
    if (smtp) await new Promise<void>((resolve) => smtp.close(() => resolve()));
  };
  await start();
  return {
    url: `smtp://127.0.0.1:${port}`,
    port,
    received,
    refuse,
    async waitFor(count, timeoutMs = 15000) {
      const deadline = Date.now() + timeoutMs;
      while (received.length < count) {
        if (Date.now() > deadline) throw new Error(`expected ${count} e-mails, got ${received.length}`);
        await new Promise((r) => setTimeout(r, 20));
      }
      return received;
    },
    stop,
    start,
    close: stop,
  };
}

async function freePort(): Promise<number> {
  const probe = createNetServer();
  await new Promise<void>((resolve) => probe.listen(0, "127.0.0.1", resolve));
  const address = probe.address();
  const port = typeof address === "object" && address ? address.port : 0;
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  return port;
}

/** Parsed on the bytes (latin1: one character per byte); text is UTF-8 once decoded. */
function parseMail(
  bytes: Buffer,
  envelope: { mailFrom: { address: string } | false; rcptTo: { address: string }[] },
): ReceivedMail {
  const raw = bytes.toString("latin1");
  const split = raw.indexOf("\r\n\r\n");
  const head = split < 0 ? raw : raw.slice(0, split);
  const body = split < 0 ? "" : raw.slice(split + 4);
  const headers = new Map<string, string>();
  for (const line of head.replace(/\r\n[ \t]+/g, " ").split("\r\n")) {
    const colon = line.indexOf(":");
    if (colon > 0) {
      const value = utf8(line.slice(colon + 1).trim());
      headers.set(line.slice(0, colon).trim().toLowerCase(), decodeWords(value));
    }
  }
  const encoding = (headers.get("content-transfer-encoding") ?? "7bit").toLowerCase();
  const text =
    encoding === "quoted-printable"
      ? decodeQuotedPrintable(body)
      : encoding === "base64"
        ? Buffer.from(body.replace(/\s+/g, ""), "base64").toString("utf8")
        : utf8(body);
  return {
    envelopeFrom: envelope.mailFrom ? envelope.mailFrom.address : "",
    envelopeTo: envelope.rcptTo.map((r) => r.address),
    raw: utf8(raw),
    headers,
    subject: headers.get("subject") ?? "",
    from: headers.get("from") ?? "",
    to: headers.get("to") ?? "",
    text: text.replace(/\r\n/g, "\n"),
  };
}

/**
 * RFC 2047 encoded words (UTF-8, Q or B). A run of adjacent words is joined as bytes before it is
 * read as UTF-8, since an encoder may split one character across two words.
 */
function decodeWords(value: string): string {
  const word = /=\?[^?]+\?([QqBb])\?([^?]*)\?=/g;
  return value.replace(/=\?[^?]+\?[QqBb]\?[^?]*\?=(?:\s+=\?[^?]+\?[QqBb]\?[^?]*\?=)*/g, (run) => {
    const parts: Buffer[] = [];
    for (const [, kind = "", data = ""] of run.matchAll(word)) {
      parts.push(
        kind.toUpperCase() === "B"
          ? Buffer.from(data, "base64")
          : Buffer.from(qpToLatin1(data.replace(/_/g, " ")), "latin1"),
      );
    }
    return Buffer.concat(parts).toString("utf8");
  });
}

const qpToLatin1 = (text: string): string =>
  text.replace(/=([0-9A-Fa-f]{2})/g, (_whole, hex: string) => String.fromCharCode(Number.parseInt(hex, 16)));

const utf8 = (latin1: string): string => Buffer.from(latin1, "latin1").toString("utf8");

/** Quoted-printable of ASCII text (what the encoders write) to UTF-8 text. */
function decodeQuotedPrintable(text: string): string {
  const input = text.replace(/=\r?\n/g, "");
  return Buffer.from(qpToLatin1(input), "latin1").toString("utf8");
}
