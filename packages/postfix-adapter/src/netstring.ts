/**
 * Netstrings (https://cr.yp.to/proto/netstrings.txt): `<length>:<bytes>,`, the framing of
 * Postfix's socketmap protocol. A decoder fed from a socket, and the encoder for answers.
 */

export class NetstringError extends Error {
  readonly kind: "malformed" | "too-large";

  constructor(kind: "malformed" | "too-large", message: string) {
    super(message);
    this.name = "NetstringError";
    this.kind = kind;
  }
}

/** One netstring as a string, to be written as UTF-8 (one native write, no buffers to join). */
export function encodeNetstring(text: string): string {
  return `${Buffer.byteLength(text, "utf8")}:${text},`;
}

const COLON = 0x3a;
const COMMA = 0x2c;

/**
 * Incremental decoder: feed() what the socket delivers, then next() until it returns null. A
 * length that is not digits, a leading zero, a missing `:` or `,` (malformed), or a length above
 * `maxLength` (too-large, found from the length digits alone, before the payload is read) throws
 * NetstringError; the stream cannot be resynchronised after that and the connection must close.
 */
export class NetstringDecoder {
  #buffer: Buffer = Buffer.alloc(0);
  #offset = 0;
  readonly #maxDigits: number;
  readonly maxLength: number;

  constructor(maxLength: number) {
    this.maxLength = maxLength;
    this.#maxDigits = String(maxLength).length;
  }

  /** Bytes received and not yet decoded. */
  get pending(): number {
    return this.#buffer.length - this.#offset;
  }

  feed(chunk: Buffer): void {
    if (this.#offset >= this.#buffer.length) {
      this.#buffer = chunk;
    } else {
      this.#buffer = Buffer.concat([this.#buffer.subarray(this.#offset), chunk]);
    }
    this.#offset = 0;
  }

  next(): Buffer | null {
    const buffer = this.#buffer;
    const start = this.#offset;
    let length = 0;
    let position = start;
    for (;;) {
      if (position >= buffer.length) return null;
      const byte = buffer[position] as number;
      if (byte === COLON) break;
      if (byte < 0x30 || byte > 0x39) throw new NetstringError("malformed", "malformed netstring length");
      if (position > start && buffer[start] === 0x30) {
        throw new NetstringError("malformed", "malformed netstring length (leading zero)");
      }
      length = length * 10 + (byte - 0x30);
      position += 1;
      if (position - start > this.#maxDigits || length > this.maxLength) {
        throw new NetstringError("too-large", `request longer than ${this.maxLength} bytes`);
      }
    }
    if (position === start) throw new NetstringError("malformed", "malformed netstring length (empty)");
    const payloadStart = position + 1;
    const end = payloadStart + length;
    if (end >= buffer.length) return null;
    if (buffer[end] !== COMMA)
      throw new NetstringError("malformed", "malformed netstring (no comma after payload)");
    this.#offset = end + 1;
    return buffer.subarray(payloadStart, end);
  }
}
