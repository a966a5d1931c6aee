// Verifying the OE's signed statements (Ed25519), as agent_runtime/execution_token.py does:
//   aes1.<kid>.<base64url(claims JSON)>.<base64url(signature over "aes1.<kid>.<claims>")>
// The runtime holds only the OE's public key, so nothing it holds can make a statement another runtime accepts.
// Messages name the reason only: never the statement, the key or the signature.
import { createHash, createPublicKey, verify, type KeyObject, X509Certificate } from "node:crypto";
import { readFileSync, statSync } from "node:fs";
import { OE_PUBLIC_KEY_FILE_ENV, type Env } from "./contract.js";
import { BodyInvalid, parseModel, type Claims } from "./protocol.js";

export const PREFIX = "aes1";
export const MAX_TTL_S = 24 * 3600;
export type Audience = "aer" | "tool" | "memory";

export class StatementError extends Error {
  constructor(
    readonly reason: string,
    readonly detail: string,
    readonly status: 401 | 403 = 401,
  ) {
    super(detail);
  }
}

export class KeySettingError extends Error {}

export function looksLikeStatement(credential: string): boolean {
  return credential.startsWith(PREFIX + ".");
}

function loadPublic(pem: string): KeyObject {
  let key: KeyObject;
  try {
    key = pem.includes("BEGIN CERTIFICATE") ? new X509Certificate(pem).publicKey : createPublicKey(pem);
  } catch {
    throw new KeySettingError("the OE public key is not a PEM public key or certificate; copy the OE's public key");
  }
  if (key.asymmetricKeyType !== "ed25519") {
    throw new KeySettingError("the OE public key is not an Ed25519 key; copy the OE's public key");
  }
  return key;
}

/** The first 8 bytes (hex) of SHA-256 over the raw public key, as execution_token.key_id. */
export function keyId(key: KeyObject): string {
  const der = key.export({ format: "der", type: "spki" });
  // An Ed25519 SPKI is a 12-byte header and the 32 raw key bytes.
  return createHash("sha256").update(der.subarray(der.length - 32)).digest("hex").slice(0, 16);
}

function unb64(text: string): Buffer {
  if (!/^[A-Za-z0-9_-]*$/.test(text)) throw new StatementError("malformed", "the statement is not base64url");
  return Buffer.from(text, "base64url");
}

/** The claims of a statement signed by one of `keys` and not expired (pure but for the crypto). */
export function parseVerified(statement: string, keys: ReadonlyMap<string, KeyObject>, nowS: number): Claims {
  const parts = statement.split(".");
  if (parts.length !== 4 || parts[0] !== PREFIX) throw new StatementError("malformed", "the credential is not an OE statement");
  const [, kid = "", payloadB64 = "", sigB64 = ""] = parts;
  const key = keys.get(kid);
  if (key === undefined) throw new StatementError("unknown_key", "the statement is signed by a key this runtime does not know");
  const signature = unb64(sigB64);
  const payload = unb64(payloadB64);
  let ok = false;
  try {
    ok = verify(null, Buffer.from(`${PREFIX}.${kid}.${payloadB64}`, "ascii"), key, signature);
  } catch {
    ok = false;
  }
  if (!ok) throw new StatementError("bad_signature", "the statement's signature does not verify");
  let claims: Claims;
  try {
    claims = parseModel("Claims", JSON.parse(payload.toString("utf8")));
  } catch (error) {
    if (error instanceof BodyInvalid || error instanceof SyntaxError) {
      throw new StatementError("malformed", "the statement's claims are malformed");
    }
    throw error;
  }
  if (!(claims.exp > nowS)) throw new StatementError("expired", "the statement has expired");
  if (claims.exp - claims.iat > MAX_TTL_S) {
    throw new StatementError("malformed", "the statement claims a lifetime longer than allowed");
  }
  return claims;
}

/** Refuse (403) a verified statement meant for another component or another Agent (pure). */
export function checkClaims(claims: Claims, options: { audience: Audience; workspace: string | null }): void {
  if (claims.aud !== options.audience) {
    throw new StatementError("wrong_audience", `the statement is for the ${claims.aud}, not the ${options.audience}`, 403);
  }
  if (options.workspace && claims.workspace !== options.workspace) {
    throw new StatementError("wrong_workspace", "the statement is for another Agent's workspace", 403);
  }
}

/** The runtime's verifier over the mounted public key file, read again when the file changes. */
export class StatementVerifier {
  private keys = new Map<string, KeyObject>();
  private stamp = "";
  private readonly cache = new Map<string, Claims>();

  constructor(
    private readonly path: string,
    private readonly clock: () => number = () => Date.now() / 1000,
  ) {
    this.reload(true);
  }

  private reload(strict: boolean): void {
    let stamp: string;
    let text: string;
    try {
      const info = statSync(this.path);
      stamp = `${info.mtimeMs}:${info.size}:${info.ino}`;
      if (stamp === this.stamp) return;
      text = readFileSync(this.path, "utf8").trim();
    } catch (error) {
      if (strict) {
        const name = error instanceof Error && "code" in error ? String(error.code) : "error";
        throw new KeySettingError(`${OE_PUBLIC_KEY_FILE_ENV}=${this.path}: cannot read it (${name}); mount the OE public key`);
      }
      return;
    }
    if (!text) {
      if (strict) throw new KeySettingError(`${OE_PUBLIC_KEY_FILE_ENV}=${this.path}: the file is empty; put the OE public key in it`);
      return;
    }
    try {
      const key = loadPublic(text);
      // The previous key stays accepted next to the new one (the OE may still sign with it while in grace).
      const keys = new Map<string, KeyObject>([[keyId(key), key]]);
      for (const [kid, old] of this.keys) if (keys.size < 2) keys.set(kid, old);
      this.keys = keys;
      this.stamp = stamp;
    } catch (error) {
      if (strict) throw error;
    }
  }

  verify(statement: string, options: { audience: Audience; workspace: string | null }): Claims {
    const now = this.clock();
    const hit = this.cache.get(statement);
    if (hit !== undefined && hit.exp > now) {
      checkClaims(hit, options);
      return hit;
    }
    const kid = statement.split(".")[1] ?? "";
    if (!this.keys.has(kid)) this.reload(false);
    const claims = parseVerified(statement, this.keys, now);
    if (this.cache.size >= 4096) this.cache.clear();
    this.cache.set(statement, claims);
    checkClaims(claims, options);
    return claims;
  }
}

export function verifierFromEnv(env: Env): StatementVerifier | null {
  const path = env[OE_PUBLIC_KEY_FILE_ENV]?.trim();
  return path ? new StatementVerifier(path) : null;
}
