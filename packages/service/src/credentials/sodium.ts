import { createRequire } from "node:module";

/** The part of sodium-native we use (the package ships no type declarations). */
export interface Sodium {
  crypto_pwhash_STRBYTES: number;
  crypto_pwhash_SALTBYTES: number;
  crypto_pwhash_ALG_ARGON2ID13: number;
  crypto_secretbox_NONCEBYTES: number;
  crypto_secretbox_MACBYTES: number;
  crypto_secretbox_KEYBYTES: number;
  crypto_pwhash_str_async(out: Buffer, passwd: Buffer, opslimit: number, memlimit: number): Promise<void>;
  crypto_pwhash_str_verify_async(str: Buffer, passwd: Buffer): Promise<boolean>;
  crypto_pwhash_async(
    out: Buffer,
    passwd: Buffer,
    salt: Buffer,
    opslimit: number,
    memlimit: number,
    alg: number,
  ): Promise<void>;
  crypto_secretbox_easy(c: Buffer, m: Buffer, n: Buffer, k: Buffer): void;
  crypto_secretbox_open_easy(m: Buffer, c: Buffer, n: Buffer, k: Buffer): boolean;
  /** Keyed BLAKE2b: `output` 16-64 bytes, `key` 16-64 bytes. */
  crypto_generichash(output: Buffer, input: Buffer, key?: Buffer): void;
  randombytes_buf(buf: Buffer): void;
  sodium_memzero(buf: Buffer): void;
}

export const sodium = createRequire(import.meta.url)("sodium-native") as Sodium;
