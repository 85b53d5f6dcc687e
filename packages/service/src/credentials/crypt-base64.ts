/** The crypt(3) base64 alphabet; digits are emitted least significant first. */
const ALPHABET = "./0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/** crypt's b64_from_24bit: `chars` characters from the 24-bit group b2:b1:b0. */
export function b64From24Bit(b2: number, b1: number, b0: number, chars: number): string {
  let w = (b2 << 16) | (b1 << 8) | b0;
  let out = "";
  for (let i = 0; i < chars; i++) {
    out += ALPHABET[w & 0x3f];
    w >>>= 6;
  }
  return out;
}

/** Encodes `digest` with crypt's byte permutation: each triple lists the byte indexes of one group. */
export function encodePermuted(
  digest: Buffer,
  groups: ReadonlyArray<readonly [number, number, number]>,
): string {
  let out = "";
  for (const [a, b, c] of groups) out += b64From24Bit(digest[a]!, digest[b]!, digest[c]!, 4);
  return out;
}
