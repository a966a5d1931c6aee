// The bundle's OpenAPI connectors executed in the Tool Pod, with the connector core's HTTP guarantees
// (connectors/executor.py, wire.py, policy.py, classify.py):
// - one 30 s budget per call (connect, redirects, reading), and the drain's/interrupt's signal on top;
// - the response body capped at 200,000 bytes (`truncated: true` past it), an error body at 4 KB;
// - redirects followed only on the connector's own origin (5 at most); anything else is refused;
// - the credential read from the Tool Pod's tenant env (auth.env) per call, never from arguments, and never
//   in a log line, an error or a result (every form of it is redacted from what comes back);
// - no cookies kept between calls.
import type { ConnectorTool, ConnectorTools } from "./tool_surface.js";
import type { ConnectorRunner } from "./tool_pod.js";
import { BundleError } from "./bundle.js";
import { isPlatformEnv } from "./contract.js";
import type { CallError } from "./protocol.js";
import { Redactor } from "./redaction.js";

export const CALL_BUDGET_MS = 30_000;
export const MAX_RESPONSE_BYTES = 200_000;
export const MAX_ERROR_BODY_BYTES = 4096;
export const MAX_REDIRECTS = 5;
const REDIRECT_STATUSES: ReadonlySet<number> = new Set([301, 302, 303, 307, 308]);
const BODY_METHODS: ReadonlySet<string> = new Set(["POST", "PUT", "PATCH"]);
const USER_AGENT = "agent-engine-connector-ts/0.1";
export const MAX_RETRIES = 3;
const MAX_RETRY_WAIT_S = 30;
const RETRY_METHODS: ReadonlySet<string> = new Set(["GET", "HEAD", "OPTIONS"]);
const RETRY_STATUSES: ReadonlySet<number> = new Set([429, 503]);
const DEFAULT_BACKOFF_S = [0.5, 1, 2];

/** Retry-After as seconds (a delta or an HTTP date), capped at 30; null when absent or unreadable (pure). */
export function retryAfterSeconds(value: string | null, nowMs: number = Date.now()): number | null {
  if (value === null) return null;
  const text = value.trim();
  if (/^[0-9]+$/.test(text)) return Math.min(Number(text), MAX_RETRY_WAIT_S);
  const moment = Date.parse(text);
  if (Number.isNaN(moment)) return null;
  return Math.min(Math.max((moment - nowMs) / 1000, 0), MAX_RETRY_WAIT_S);
}

/** Seconds to wait before retrying, or null when this answer must not be retried (policy.py's rule, pure). */
export function retryWait(method: string, status: number, retryAfter: string | null, attempt: number): number | null {
  if (!RETRY_METHODS.has(method) || !RETRY_STATUSES.has(status) || attempt >= MAX_RETRIES) return null;
  return retryAfterSeconds(retryAfter) ?? DEFAULT_BACKOFF_S[attempt] ?? null;
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => {
      clearTimeout(timer);
      reject(signal.reason);
    }, { once: true });
  });
}
const EXPLANATION_LIMIT = 300;

interface ParamSpec {
  readonly name: string;
  readonly arg: string;
  readonly in: "path" | "query" | "header" | "cookie";
  readonly style?: string;
  readonly explode?: boolean;
  readonly required?: boolean;
}

interface AuthSpec {
  readonly type: "bearer" | "basic" | "api_key" | "path";
  readonly env?: string | null;
  readonly in?: "header" | "query" | "cookie" | "path" | null;
  readonly name?: string | null;
  readonly prefix?: string | null;
}

interface ToolDocument {
  readonly name: string;
  readonly method: string;
  readonly path: string;
  readonly description?: string;
  readonly params?: readonly ParamSpec[];
  readonly body?: { readonly media_type: string; readonly arg?: string | null; readonly properties?: readonly string[]; readonly required?: boolean } | null;
  readonly authenticated?: boolean;
  readonly inputSchema: Record<string, unknown>;
}

interface ConnectorDocument {
  readonly name: string;
  readonly source?: { readonly base_url?: string | null };
  readonly auth?: AuthSpec | null;
  readonly headers?: Readonly<Record<string, string>> | null;
  readonly tls?: unknown;
  readonly tools: readonly ToolDocument[];
}

type Outcome = { status: "success"; result: unknown } | { status: "error"; error: CallError };

const GENERIC: Readonly<Record<string, string>> = {
  auth: "the provider rejected the credential",
  forbidden: "the credential is not allowed to do this",
  not_found: "the provider has no such resource",
  rate_limited: "the provider is rate limiting requests",
  timeout: "the provider did not answer in time",
  connection: "the provider could not be reached",
  client_error: "the provider rejected the request",
  server_error: "the provider failed to handle the request",
};

export function statusCategory(status: number): string {
  if (status === 401) return "auth";
  if (status === 403) return "forbidden";
  if (status === 404 || status === 410) return "not_found";
  if (status === 429) return "rate_limited";
  if (status === 408 || status === 504) return "timeout";
  if (status >= 500) return "server_error";
  return "client_error";
}

/** The absolute target of a redirect when it stays on the current origin, else null (pure). */
export function sameOriginTarget(current: string, location: string): string | null {
  let target: URL;
  try {
    target = new URL(location.trim(), current);
  } catch {
    return null;
  }
  return target.origin === new URL(current).origin ? target.href : null;
}

function scalarText(value: unknown): string {
  if (typeof value === "boolean") return value ? "true" : "false";
  if (typeof value === "object" && value !== null) return JSON.stringify(value);
  return String(value);
}

function queryPairs(param: ParamSpec, value: unknown, out: [string, string][]): void {
  if (Array.isArray(value)) {
    if (param.explode ?? true) for (const item of value) out.push([param.name, scalarText(item)]);
    else out.push([param.name, value.map(scalarText).join(",")]);
  } else {
    out.push([param.name, scalarText(value)]);
  }
}

class ArgumentProblem extends Error {}
class CredentialMissing extends Error {}

interface Prepared {
  readonly method: string;
  readonly url: string;
  readonly headers: Record<string, string>;
  readonly body: string | null;
  readonly secrets: readonly string[];
  readonly safeUrl: string;
}

class ToolPlan {
  constructor(
    private readonly connector: ConnectorDocument,
    readonly tool: ToolDocument,
    private readonly base: string,
  ) {}

  get safeUrl(): string {
    return this.base + this.tool.path;
  }

  prepare(args: Record<string, unknown>, env: Readonly<Record<string, string>>): Prepared {
    const tool = this.tool;
    const auth = tool.authenticated === false ? null : (this.connector.auth ?? null);
    const required = ((tool.inputSchema["required"] as string[] | undefined) ?? []).filter((name) => !(auth?.type === "path" && name === auth.name));
    const missing = required.filter((name) => args[name] == null);
    if (missing.length > 0) {
      throw new ArgumentProblem(`missing required argument(s) ${missing.join(", ")} for ${tool.method} ${this.safeUrl}; supply them in the tool call`);
    }
    let credential: string | null = null;
    if (auth?.env) {
      credential = env[auth.env] ?? "";
      if (!credential) throw new CredentialMissing(`credential environment variable ${auth.env} is not set; the connector needs it for ${tool.method} ${this.safeUrl}`);
    }
    const secrets: string[] = credential ? [credential] : [];
    const params = tool.params ?? [];
    const byName = new Map(params.filter((p) => p.in === "path").map((p) => [p.name, p]));
    const path = tool.path.replace(/\{([^}]+)\}/g, (_, name: string) => {
      if (auth?.type === "path" && name === auth.name) {
        const encoded = encodeURIComponent(credential ?? "");
        secrets.push(encoded);
        return encoded;
      }
      const arg = byName.get(name)?.arg ?? name;
      const value = args[arg];
      if (value == null) throw new ArgumentProblem(`missing required path argument '${arg}'; supply it in the tool call`);
      return encodeURIComponent(scalarText(value));
    });
    const pairs: [string, string][] = [];
    const headers: Record<string, string> = { accept: "application/json", "user-agent": USER_AGENT, ...(this.connector.headers ?? {}) };
    const cookies: string[] = [];
    for (const param of params) {
      const value = args[param.arg];
      if (value == null || param.in === "path") continue;
      if (param.in === "query") queryPairs(param, value, pairs);
      else if (param.in === "header") {
        const text = scalarText(value);
        if (/[\r\n]/.test(text)) throw new ArgumentProblem(`header argument '${param.arg}' must be one line`);
        headers[param.name.toLowerCase()] = text;
      } else cookies.push(`${param.name}=${encodeURIComponent(scalarText(value))}`);
    }
    if (credential && auth) {
      if (auth.type === "bearer") headers["authorization"] = `Bearer ${credential}`;
      else if (auth.type === "basic") {
        const token = Buffer.from(credential.includes(":") ? credential : `${credential}:`).toString("base64");
        secrets.push(token);
        headers["authorization"] = `Basic ${token}`;
      } else if (auth.type === "api_key" && auth.name) {
        const value = auth.prefix ? `${auth.prefix}${credential}` : credential;
        if (auth.in === "query") {
          pairs.push([auth.name, value]);
          secrets.push(encodeURIComponent(credential));
        } else if (auth.in === "cookie") cookies.push(`${auth.name}=${value}`);
        else headers[auth.name.toLowerCase()] = value;
      }
    }
    if (cookies.length > 0) headers["cookie"] = cookies.join("; ");
    let url = this.base + path;
    if (pairs.length > 0) url += "?" + new URLSearchParams(pairs).toString();
    let body: string | null = null;
    const spec = tool.body;
    if (spec) {
      let payload: unknown;
      if (spec.arg) payload = args[spec.arg];
      else {
        const picked = Object.fromEntries((spec.properties ?? []).filter((name) => name in args).map((name) => [name, args[name]]));
        payload = Object.keys(picked).length > 0 || spec.required ? picked : undefined;
      }
      if (payload !== undefined && payload !== null) {
        headers["content-type"] = spec.media_type;
        body = spec.media_type === "application/x-www-form-urlencoded"
          ? new URLSearchParams(Object.entries(payload as Record<string, unknown>).map(([k, v]): [string, string] => [k, scalarText(v)])).toString()
          : JSON.stringify(payload);
      }
    }
    return { method: tool.method, url, headers, body, secrets, safeUrl: this.safeUrl };
  }
}

async function readCapped(response: Response, cap: number): Promise<{ data: Buffer; truncated: boolean }> {
  const chunks: Buffer[] = [];
  let size = 0;
  if (response.body === null) return { data: Buffer.alloc(0), truncated: false };
  const reader = response.body.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    const chunk = Buffer.from(value);
    if (size + chunk.length > cap) {
      chunks.push(chunk.subarray(0, cap - size));
      await reader.cancel();
      return { data: Buffer.concat(chunks), truncated: true };
    }
    size += chunk.length;
    chunks.push(chunk);
  }
  return { data: Buffer.concat(chunks), truncated: false };
}

function isJson(contentType: string | null): boolean {
  const media = (contentType ?? "").split(";")[0]?.trim().toLowerCase() ?? "";
  return media === "application/json" || media.endsWith("+json");
}

function sanitize(text: string, redactor: Redactor): string {
  const clean = redactor.text(text).replace(/[\x00-\x08\x0b-\x1f\x7f-\x9f]|\x1b\[[0-9;]*[A-Za-z]/g, "").replace(/\b[a-z][a-z0-9+.-]*:\/\/\S*/gi, "[url]");
  return clean.length > EXPLANATION_LIMIT ? clean.slice(0, EXPLANATION_LIMIT - 3) + "..." : clean;
}

function bodyMessage(data: Buffer): string {
  const text = data.toString("utf8");
  try {
    const parsed = JSON.parse(text) as Record<string, unknown>;
    for (const key of ["message", "error_description", "detail", "title", "error", "reason"]) {
      const value = parsed[key];
      if (typeof value === "string" && value) return value;
    }
    return "";
  } catch {
    return text.length < 200 && !text.trimStart().startsWith("<") ? text.trim() : "";
  }
}

export class OpenApiConnector {
  private readonly plans = new Map<string, ToolPlan>();
  readonly definitions: ConnectorTools;

  constructor(
    readonly document: ConnectorDocument,
    private readonly env: Readonly<Record<string, string>>,
    checkCredential = true,
  ) {
    const base = (document.source?.base_url ?? "").replace(/\/+$/, "");
    if (!/^https?:\/\//.test(base)) throw new BundleError(`connector '${document.name}': source.base_url must be an http(s) URL; set it in the Connector`);
    if (document.tls) throw new BundleError(`connector '${document.name}': tls (a private CA) is not supported by the Node runtime yet; use the Python runtime for it`);
    const authEnv = document.auth?.env;
    if (authEnv && isPlatformEnv(authEnv)) {
      throw new BundleError(`connector '${document.name}': auth.env ${authEnv} is a platform variable name, which never reaches connectors; rename the credential's env in the Connector's auth.env`);
    }
    if (checkCredential && authEnv && !env[authEnv]) {
      throw new BundleError(`connector '${document.name}' reads its credential from env ${authEnv}, which is not set in the Tool Pod; provide the Connector's auth secret`);
    }
    const tools: ConnectorTool[] = [];
    for (const tool of document.tools) {
      this.plans.set(tool.name, new ToolPlan(document, tool, base));
      tools.push({ name: tool.name, description: tool.description ?? "", inputSchema: tool.inputSchema, method: tool.method });
    }
    this.definitions = { name: document.name, tools };
  }

  has(tool: string): boolean {
    return this.plans.has(tool);
  }

  async execute(toolName: string, args: Record<string, unknown>, signal: AbortSignal): Promise<Outcome> {
    const plan = this.plans.get(toolName);
    if (plan === undefined) return { status: "error", error: { category: "unknown_tool", explanation: `no tool named '${toolName}'` } };
    let prepared: Prepared;
    try {
      prepared = plan.prepare(args, this.env);
    } catch (error) {
      if (error instanceof ArgumentProblem) return { status: "error", error: { category: "invalid_arguments", explanation: error.message } };
      if (error instanceof CredentialMissing) return { status: "error", error: { category: "credential_missing", explanation: error.message } };
      throw error;
    }
    const redactor = new Redactor(prepared.secrets);
    const budget = AbortSignal.any([signal, AbortSignal.timeout(CALL_BUDGET_MS)]);
    let url = prepared.url;
    let method = prepared.method;
    let body = prepared.body;
    let attempt = 0;
    const startedMs = performance.now();
    try {
      for (let hop = 0; ; hop += 1) {
        const headers = { ...prepared.headers };
        if (body === null) delete headers["content-type"];
        else headers["content-length"] = String(Buffer.byteLength(body));
        if (body === null && BODY_METHODS.has(method)) headers["content-length"] = "0";
        const response = await fetch(url, { method, headers, body, redirect: "manual", signal: budget });
        if (REDIRECT_STATUSES.has(response.status)) {
          await response.body?.cancel();
          const target = sameOriginTarget(url, response.headers.get("location") ?? "");
          if (target === null || hop >= MAX_REDIRECTS) {
            return {
              status: "error",
              error: {
                category: "client_error",
                status_code: response.status,
                explanation: `HTTP ${response.status}: ${GENERIC["client_error"]}: redirect refused: the connector follows redirects only to its own origin`,
              },
            };
          }
          if (response.status === 303 || ((response.status === 301 || response.status === 302) && method === "POST")) {
            method = method === "HEAD" ? "HEAD" : "GET";
            body = null;
          }
          url = target;
          continue;
        }
        const wait = retryWait(method, response.status, response.headers.get("retry-after"), attempt);
        if (wait !== null && performance.now() + wait * 1000 < startedMs + CALL_BUDGET_MS) {
          // 429 and 503 of a read: waited out (Retry-After, else a backoff) within the call's one budget.
          await response.body?.cancel();
          attempt += 1;
          hop -= 1;
          await sleep(wait * 1000, budget);
          continue;
        }
        if (response.status >= 400) {
          const { data } = await readCapped(response, MAX_ERROR_BODY_BYTES);
          const category = statusCategory(response.status);
          const detail = sanitize(bodyMessage(data), redactor);
          return {
            status: "error",
            error: { category, status_code: response.status, explanation: `HTTP ${response.status}: ${GENERIC[category]}${detail ? `: ${detail}` : ""}` },
          };
        }
        const { data, truncated } = await readCapped(response, MAX_RESPONSE_BYTES);
        const contentType = response.headers.get("content-type");
        let value: unknown;
        if (data.length === 0) value = method === "HEAD" || response.status === 204 ? null : "";
        else if (isJson(contentType) && !truncated) {
          try {
            value = JSON.parse(data.toString("utf8"));
          } catch {
            value = data.toString("utf8");
          }
        } else value = data.toString("utf8");
        return { status: "success", result: redactor.value({ status_code: response.status, content_type: contentType, body: value, truncated }) };
      }
    } catch (error) {
      if (signal.aborted) throw signal.reason;
      const timedOut = error instanceof Error && (error.name === "TimeoutError" || error.name === "AbortError");
      const category = timedOut ? "timeout" : "connection";
      // Only the method and the path template: the URL may hold a query credential.
      return { status: "error", error: { category, explanation: `${GENERIC[category]} (${plan.tool.method} ${prepared.safeUrl})` } };
    }
  }
}

/** The bundle's connectors. The Tool Pod checks each credential is in its env (`checkCredentials`); the AER,
 * which only lists the tools for the OE, holds none. */
export function openApiConnectors(
  documents: readonly Record<string, unknown>[],
  secretEnv: Readonly<Record<string, string>>,
  options: { checkCredentials: boolean } = { checkCredentials: true },
): ConnectorRunner {
  const connectors = documents.map((document) => new OpenApiConnector(document as unknown as ConnectorDocument, secretEnv, options.checkCredentials));
  const byTool = new Map<string, OpenApiConnector>();
  for (const connector of connectors) for (const tool of connector.definitions.tools) byTool.set(tool.name, connector);
  return {
    definitions: connectors.map((connector) => connector.definitions),
    has: (tool) => byTool.has(tool),
    execute: async (tool, args, signal) => {
      const connector = byTool.get(tool);
      if (connector === undefined) return { status: "error", error: { category: "unknown_tool", explanation: `no tool named '${tool}'` } };
      return connector.execute(tool, args, signal);
    },
  };
}
