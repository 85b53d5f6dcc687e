import { randomBytes } from "node:crypto";

const crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";

/** A ULID: 48-bit millisecond time and 80 random bits, 26 Crockford base32 characters, sortable. */
export function ulid(now = Date.now()): string {
  let time = "";
  let t = now;
  for (let i = 0; i < 10; i++) {
    time = crockford[t % 32] + time;
    t = Math.floor(t / 32);
  }
  const random = randomBytes(10);
  let bits = 0;
  let value = 0;
  let rest = "";
  for (const byte of random) {
    value = (value << 8) | byte;
    bits += 8;
    while (bits >= 5) {
      rest += crockford[(value >>> (bits - 5)) & 31];
      bits -= 5;
    }
  }
  return time + rest;
}
