// A component's HTTP server on node:http: the guard, a body cap and arrival deadline, JSON answers, and the
// probes (/healthz, /readyz) and /metrics every component has. Handlers get a parsed request and return an
// answer; they never see a socket.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { HEALTH_PATH, METRICS_PATH, READY_PATH } from "./contract.js";
import { checkRequest, type GuardSettings } from "./guard.js";
import { getLogger } from "./logging.js";
import { BodyInvalid, MAX_BODY_BYTES, type Claims } from "./protocol.js";

const logger = getLogger("agent_runtime_ts.http");

export const DEFAULT_BODY_TIMEOUT_S = 10;

export interface Incoming {
  readonly method: string;
  readonly path: string;
  readonly params: Readonly<Record<string, string>>;
  readonly body: string;
  readonly claims: Claims | null;
  readonly accept: string;
}

export interface Answer {
  readonly status: number;
  readonly body: unknown;
  /** A streamed answer (NDJSON lines as they are made) instead of `body`. */
  readonly lines?: AsyncIterable<string>;
  readonly contentType?: string;
}

export type Handler = (request: Incoming) => Promise<Answer>;

export interface Route {
  readonly method: "GET" | "POST";
  readonly path: string; // `{name}` segments are parameters
  readonly handler: Handler;
  readonly maxBodyBytes?: number;
}

export function json(status: number, body: unknown): Answer {
  return { status, body };
}

export function tooLarge(limit: number): Answer {
  return json(413, { detail: [{ field: "(body)", problem: `larger than ${limit} bytes` }] });
}

export function malformed(error: BodyInvalid, status = 400): Answer {
  return json(status, { detail: error.problems });
}

function match(route: Route, path: string): Record<string, string> | null {
  const want = route.path.split("/");
  const got = path.split("/");
  if (want.length !== got.length) return null;
  const params: Record<string, string> = {};
  for (let i = 0; i < want.length; i += 1) {
    const w = want[i] ?? "";
    const g = got[i] ?? "";
    if (w.startsWith("{") && w.endsWith("}")) {
      if (!g) return null;
      params[w.slice(1, -1)] = decodeURIComponent(g);
    } else if (w !== g) {
      return null;
    }
  }
  return params;
}

class BodyTooLarge extends Error {}
class BodyTimeout extends Error {}

function readBody(request: IncomingMessage, limit: number, timeoutMs: number): Promise<string> {
  const declared = Number(request.headers["content-length"] ?? "0");
  if (declared > limit) return Promise.reject(new BodyTooLarge());
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const timer = setTimeout(() => reject(new BodyTimeout()), timeoutMs);
    request.on("data", (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        clearTimeout(timer);
        reject(new BodyTooLarge());
        request.resume();
        return;
      }
      chunks.push(chunk);
    });
    request.on("end", () => {
      clearTimeout(timer);
      resolve(Buffer.concat(chunks).toString("utf8"));
    });
    request.on("error", (error) => {
      clearTimeout(timer);
      reject(error);
    });
  });
}

function send(response: ServerResponse, answer: Answer, extra: Record<string, string> = {}): void {
  const text = answer.body === undefined ? "" : typeof answer.body === "string" ? answer.body : JSON.stringify(answer.body);
  const type = typeof answer.body === "string" ? "text/plain; version=0.0.4" : "application/json";
  response.writeHead(answer.status, { "content-type": type, "content-length": Buffer.byteLength(text), ...extra });
  response.end(text);
}

export interface ComponentServerOptions {
  readonly routes: readonly Route[];
  readonly guard: GuardSettings;
  readonly bodyTimeoutS?: number;
  readonly metrics?: () => string;
}

export class ComponentServer {
  ready = false;
  private readonly server: Server;

  constructor(private readonly options: ComponentServerOptions) {
    this.server = createServer((request, response) => {
      this.handle(request, response).catch((error: unknown) => {
        logger.error(`request ${request.method ?? "?"} ${request.url ?? "?"} failed`, error);
        if (!response.headersSent) send(response, json(500, { detail: "internal error" }));
      });
    });
    this.server.keepAliveTimeout = 75_000;
  }

  private async handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const path = (request.url ?? "/").split("?")[0] ?? "/";
    const method = request.method ?? "GET";
    if (path === HEALTH_PATH) return send(response, json(200, { status: "ok" }));
    if (path === READY_PATH) {
      return send(response, this.ready ? json(200, { status: "ready" }) : json(503, { status: "not ready", reason: "starting" }));
    }
    if (path === METRICS_PATH) return send(response, json(200, this.options.metrics?.() ?? ""));
    const verdict = checkRequest(this.options.guard, path, request.headers.authorization);
    if (!verdict.allowed) {
      request.resume();
      if (verdict.body === null) return send(response, { status: 401, body: undefined }, { "www-authenticate": "Bearer" });
      return send(response, json(verdict.status, verdict.body), verdict.status === 401 ? { "www-authenticate": "Bearer" } : {});
    }
    let found: { route: Route; params: Record<string, string> } | null = null;
    let pathKnown = false;
    for (const route of this.options.routes) {
      const params = match(route, path);
      if (params === null) continue;
      pathKnown = true;
      if (route.method === method) {
        found = { route, params };
        break;
      }
    }
    if (found === null) {
      request.resume();
      return send(response, pathKnown ? json(405, { detail: "method not allowed" }) : json(404, { detail: "Not Found" }));
    }
    const limit = found.route.maxBodyBytes ?? MAX_BODY_BYTES;
    let body: string;
    try {
      body = method === "GET" ? "" : await readBody(request, limit, (this.options.bodyTimeoutS ?? DEFAULT_BODY_TIMEOUT_S) * 1000);
    } catch (error) {
      if (error instanceof BodyTooLarge) return send(response, tooLarge(limit), { connection: "close" });
      if (error instanceof BodyTimeout) {
        return send(response, json(408, { detail: "the request body did not arrive in time" }), { connection: "close" });
      }
      throw error;
    }
    const accept = String(request.headers.accept ?? "");
    const answer = await found.route.handler({ method, path, params: found.params, body, claims: verdict.claims, accept });
    if (answer.lines !== undefined) {
      response.writeHead(answer.status, { "content-type": answer.contentType ?? "application/x-ndjson", "cache-control": "no-cache" });
      for await (const line of answer.lines) response.write(line);
      response.end();
      return;
    }
    send(response, answer);
  }

  listen(host: string, port: number): Promise<void> {
    return new Promise((resolve, reject) => {
      this.server.once("error", reject);
      this.server.listen({ host, port, ipv6Only: false, backlog: 2048 }, () => {
        this.server.off("error", reject);
        resolve();
      });
    });
  }

  address(): number {
    const address = this.server.address();
    return typeof address === "object" && address !== null ? address.port : 0;
  }

  close(): Promise<void> {
    this.ready = false;
    return new Promise((resolve) => {
      this.server.close(() => resolve());
      this.server.closeIdleConnections();
    });
  }
}
