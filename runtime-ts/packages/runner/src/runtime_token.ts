// The Agent's runtime bearer token: RUNTIME_TOKEN_FILE (the mounted Secret, read again when it changes, the
// previous token accepted for RUNTIME_TOKEN_GRACE_S) or RUNTIME_TOKEN (local runs), as servers/auth.py reads it.
import { timingSafeEqual } from "node:crypto";
import { readFileSync } from "node:fs";
import { TOKEN_ENV, TOKEN_FILE_ENV, TOKEN_FILE_PATH, type Env } from "./contract.js";

export const GRACE_ENV = "RUNTIME_TOKEN_GRACE_S";
export const DEFAULT_GRACE_S = 600;

export class RuntimeTokenError extends Error {}

function readTokenFile(path: string): string {
  let token: string;
  try {
    token = readFileSync(path, "utf8").trim();
  } catch (error) {
    const code = error instanceof Error && "code" in error ? String(error.code) : "error";
    if (code === "ENOENT") {
      throw new RuntimeTokenError(
        `${TOKEN_FILE_ENV}=${path}: no such file; mount the runtime token Secret (key 'token') so the file exists (normally ${TOKEN_FILE_PATH})`,
      );
    }
    throw new RuntimeTokenError(`${TOKEN_FILE_ENV}=${path}: cannot read it (${code}); it must be a readable UTF-8 text file`);
  }
  if (!token) throw new RuntimeTokenError(`${TOKEN_FILE_ENV}=${path}: the file is empty; put the token in it`);
  return token;
}

function sameSecret(presented: string, expected: string): boolean {
  const a = Buffer.from(presented);
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
}

export class RuntimeToken {
  private previous: { token: string; until: number } | null = null;
  private lastLook = 0;

  constructor(
    private currentToken: string,
    private readonly path: string | null,
    private readonly graceS: number = DEFAULT_GRACE_S,
  ) {}

  static fromEnv(env: Env): RuntimeToken {
    const graceRaw = (env[GRACE_ENV] ?? "").trim();
    const grace = graceRaw === "" ? DEFAULT_GRACE_S : Number(graceRaw);
    if (!Number.isFinite(grace) || grace < 0) {
      throw new RuntimeTokenError(`${GRACE_ENV}=${JSON.stringify(graceRaw)} is not a number of seconds; use 0 or more, or unset it`);
    }
    const file = (env[TOKEN_FILE_ENV] ?? "").trim();
    if (file) return new RuntimeToken(readTokenFile(file), file, grace);
    const token = (env[TOKEN_ENV] ?? "").trim();
    if (token) return new RuntimeToken(token, null, grace);
    throw new RuntimeTokenError(
      `no runtime token: set ${TOKEN_FILE_ENV} to the mounted token file (normally ${TOKEN_FILE_PATH}), or ${TOKEN_ENV} for a local run`,
    );
  }

  current(): string {
    this.look(false);
    return this.currentToken;
  }

  private look(force: boolean): void {
    if (this.path === null) return;
    const now = Date.now();
    if (!force && now - this.lastLook < 1000) return;
    this.lastLook = now;
    let token: string;
    try {
      token = readTokenFile(this.path);
    } catch {
      return; // a half-written file during a change: the token in hand stays in service
    }
    if (token !== this.currentToken) {
      this.previous = { token: this.currentToken, until: now + this.graceS * 1000 };
      this.currentToken = token;
    }
  }

  private matches(presented: string): boolean {
    if (sameSecret(presented, this.currentToken)) return true;
    return this.previous !== null && this.previous.until > Date.now() && sameSecret(presented, this.previous.token);
  }

  /** Constant-time; an unknown token makes the file be looked at again first. */
  accepts(presented: string): boolean {
    this.look(false);
    if (this.matches(presented)) return true;
    if (this.path === null) return false;
    this.look(true);
    return this.matches(presented);
  }

  toString(): string {
    return "RuntimeToken(***)";
  }
}
