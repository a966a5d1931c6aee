// Who may call a runtime's routes, as servers/auth.py decides it: without the OE's public key, the Agent's
// runtime token opens every route but the probes; with it, a route opens to the OE's signed statement for
// this component and Agent, and the token opens only what `tokenOpens` allows (nothing on the Tool Pod).
import { UNAUTHENTICATED_PATHS } from "./contract.js";
import type { Claims } from "./protocol.js";
import type { RuntimeToken } from "./runtime_token.js";
import { looksLikeStatement, StatementError, type Audience, type StatementVerifier } from "./statement.js";

export type GuardVerdict =
  | { readonly allowed: true; readonly claims: Claims | null }
  | { readonly allowed: false; readonly status: 401 | 403; readonly body: Record<string, string> | null };

export interface GuardSettings {
  readonly token: RuntimeToken;
  readonly verifier: StatementVerifier | null;
  readonly audience: Audience;
  readonly workspace: string | null;
  readonly tokenOpens: (path: string) => boolean;
}

function bearer(header: string | undefined): string | null {
  if (header === undefined) return null;
  const space = header.indexOf(" ");
  if (space < 0 || header.slice(0, space).toLowerCase() !== "bearer") return null;
  return header.slice(space + 1).trim();
}

export function checkRequest(settings: GuardSettings, path: string, authorization: string | undefined): GuardVerdict {
  if (UNAUTHENTICATED_PATHS.has(path)) return { allowed: true, claims: null };
  const presented = bearer(authorization);
  if (settings.verifier === null) {
    if (presented !== null && settings.token.accepts(presented)) return { allowed: true, claims: null };
    return { allowed: false, status: 401, body: null };
  }
  if (presented !== null && looksLikeStatement(presented)) {
    try {
      const claims = settings.verifier.verify(presented, { audience: settings.audience, workspace: settings.workspace });
      return { allowed: true, claims };
    } catch (error) {
      if (error instanceof StatementError) {
        return { allowed: false, status: error.status, body: { error: error.reason, detail: error.detail } };
      }
      throw error;
    }
  }
  if (presented !== null && settings.token.accepts(presented)) {
    if (settings.tokenOpens(path)) return { allowed: true, claims: null };
    return {
      allowed: false,
      status: 403,
      body: {
        error: "oe_statement_required",
        detail: `the Agent's runtime token does not open ${path} here; only the OE's signed statement does`,
      },
    };
  }
  return { allowed: false, status: 401, body: { error: "unauthenticated", detail: "no credential" } };
}
