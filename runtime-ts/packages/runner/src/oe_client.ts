// The AER's client of the Orchestration Engine: POST /tool/execute, /tool/result and /executor/callback with
// the Agent's runtime token. Any failure to get an answer is a PlatformFailure: without the OE nothing runs.
import {
  OE_CALLBACK_PATH,
  OE_GRAPH_STREAM_PATH,
  OE_TOOL_EXECUTE_PATH,
  OE_TOOL_RESULT_PATH,
  parseModel,
  type ExecutorCallback,
  type GraphStreamChunk,
  type ToolExecuteAnswer,
  type ToolExecuteRequest,
  type ToolResultRequest,
} from "./protocol.js";
import type { RuntimeToken } from "./runtime_token.js";
import { PlatformFailure } from "./sdk_errors.js";
import { OE_URL_ENV, type Env } from "./contract.js";

export interface OEApi {
  toolExecute(request: ToolExecuteRequest): Promise<ToolExecuteAnswer>;
  toolResult(request: ToolResultRequest): Promise<void>;
  callback(callback: ExecutorCallback): Promise<void>;
  graphStream(chunk: GraphStreamChunk): Promise<void>;
}

// Generous: a held call's answer comes back only once the OE has it (a Tool Pod call of up to its timeout).
const CALL_TIMEOUT_MS = 15 * 60 * 1000;
const CALLBACK_ATTEMPTS = 5;

export function oeUrlFromEnv(env: Env): string {
  const url = (env[OE_URL_ENV] ?? "").trim().replace(/\/+$/, "");
  if (!url) throw new Error(`${OE_URL_ENV} is not set; the operator renders it (the OE's Service URL)`);
  if (!/^https?:\/\//.test(url)) throw new Error(`${OE_URL_ENV}=${url} is not an http(s) URL`);
  return url;
}

export class OEClient implements OEApi {
  constructor(
    private readonly baseUrl: string,
    private readonly token: RuntimeToken,
  ) {}

  private async post(path: string, body: unknown, timeoutMs = CALL_TIMEOUT_MS): Promise<unknown> {
    let response: Response;
    try {
      response = await fetch(this.baseUrl + path, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${this.token.current()}` },
        body: JSON.stringify(body),
        redirect: "error",
        signal: AbortSignal.timeout(timeoutMs),
      });
    } catch (error) {
      const why = error instanceof Error ? error.name : "error";
      throw new PlatformFailure(`the OE did not answer ${path} (${why})`);
    }
    const text = await response.text();
    if (response.status >= 300) {
      // The OE's error body names the problem; it never carries a secret of ours.
      throw new PlatformFailure(`the OE answered ${path} with HTTP ${response.status}: ${text.slice(0, 300)}`);
    }
    try {
      return text ? JSON.parse(text) : null;
    } catch {
      throw new PlatformFailure(`the OE's answer to ${path} is not JSON`);
    }
  }

  async toolExecute(request: ToolExecuteRequest): Promise<ToolExecuteAnswer> {
    const answer = await this.post(OE_TOOL_EXECUTE_PATH, request);
    try {
      return parseModel("ToolExecuteAnswer", answer);
    } catch {
      throw new PlatformFailure(`the OE's answer to the call at step ${request.step} is not a ToolExecuteAnswer`);
    }
  }

  async toolResult(request: ToolResultRequest): Promise<void> {
    await this.post(OE_TOOL_RESULT_PATH, request);
  }

  async graphStream(chunk: GraphStreamChunk): Promise<void> {
    await this.post(OE_GRAPH_STREAM_PATH, chunk, 30_000);
  }

  async callback(callback: ExecutorCallback): Promise<void> {
    let last: unknown = null;
    for (let attempt = 0; attempt < CALLBACK_ATTEMPTS; attempt += 1) {
      try {
        await this.post(OE_CALLBACK_PATH, callback, 30_000);
        return;
      } catch (error) {
        last = error;
        // 4xx is the OE's final word (a drained run's callback is refused): no retry changes it.
        if (error instanceof PlatformFailure && / HTTP 4\d\d/.test(error.message)) throw error;
        await new Promise((resolve) => setTimeout(resolve, 200 * 2 ** attempt));
      }
    }
    throw last;
  }
}
