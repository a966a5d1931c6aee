// The Tool Pod's HTTP surface (RUNNER_MODE=tool, port 8002), as servers/tool.py: POST /execute runs one
// remote tenant tool (or a connector's), POST /invoke_llm one model call, both answering 200 with a
// CallOutcome; 422 names each bad field. Every call of an execution is tracked for POST /drain and
// POST /interrupt/call. Only the OE's statements open it when the OE's public key is mounted: never the
// runtime token the AER holds. Every outcome leaves redacted of every Tool Pod secret.
import { createHash } from "node:crypto";
import type { App, ToolSpec } from "./app.js";
import { CallInterrupted, ExecutionDraining } from "./call_errors.js";
import { workRoutes } from "./drain_routes.js";
import { ComponentServer, json, malformed, type Answer, type Route } from "./http_server.js";
import { getLogger, withLogContext } from "./logging.js";
import { ModelError, type ModelDelta, type ModelRunner } from "./model.js";
import {
  BodyInvalid,
  INVALID_ARGUMENTS,
  INVOKE_LLM_PATH,
  parseBody,
  TIMEOUT,
  TOOL_ERROR,
  TOOL_EXECUTE_PATH,
  TOOLS_PATH,
  UNKNOWN_TOOL,
  PROTOCOL_CONSTANTS,
  type CallError,
  type CallOutcome,
  type Claims,
  type InvokeLLMRequest,
  type ToolPodExecuteRequest,
} from "./protocol.js";
import { Redactor, WindowRedactor } from "./redaction.js";
import type { RuntimeToken } from "./runtime_token.js";
import { SuspendRequested, ToolError } from "./sdk_errors.js";
import type { StatementVerifier } from "./statement.js";
import { toolSurface, type ConnectorTools } from "./tool_surface.js";
import { WorkRegistry, type DrainSettings, type PodIdentity } from "./work_registry.js";

const logger = getLogger("agent_runtime_ts.tool");
const NDJSON = "application/x-ndjson";
const CONNECTOR_TEST_PATH = "/connectors/{name}/test";

/** Connector tools run by the bundle's executors (connector_executor.ts). */
export interface ConnectorRunner {
  readonly definitions: readonly ConnectorTools[];
  has(tool: string): boolean;
  execute(tool: string, args: Record<string, unknown>, signal: AbortSignal): Promise<{ status: "success"; result: unknown } | { status: "error"; error: CallError }>;
}

export interface ToolPodOptions {
  readonly app: App | null;
  readonly secretEnv: Readonly<Record<string, string>>;
  readonly extraSecrets?: readonly string[];
  readonly token: RuntimeToken;
  readonly verifier: StatementVerifier | null;
  readonly appId: string | null;
  readonly pod: PodIdentity;
  readonly drainSettings: DrainSettings;
  readonly connectors?: ConnectorRunner | null;
  readonly bodyTimeoutS?: number;
}

type Settled = { status: "success"; result: unknown } | { status: "error"; error: CallError } | { status: "suspend"; result: unknown };

class Timeout extends Error {}

function withTimeout<T>(promise: Promise<T>, timeoutS: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    promise,
    new Promise<T>((_, reject) => {
      timer = setTimeout(() => reject(new Timeout()), timeoutS * 1000);
    }),
  ]).finally(() => clearTimeout(timer));
}

/** Once per (route, execution, step): an OE that re-drives a step gets the outcome of the call it already sent. */
class RecentCalls {
  private readonly calls = new Map<string, { digest: string; outcome: Promise<CallOutcome> }>();

  once(route: string, executionId: string | null | undefined, step: number | null | undefined, body: string, run: () => Promise<CallOutcome>): Promise<CallOutcome> {
    if (!executionId || step == null) return run();
    const key = `${route} ${executionId} ${step}`;
    const digest = createHash("sha256").update(body).digest("hex");
    const known = this.calls.get(key);
    if (known !== undefined && known.digest === digest) return known.outcome;
    const outcome = run();
    if (this.calls.size >= 4096) this.calls.delete(this.calls.keys().next().value as string);
    this.calls.set(key, { digest, outcome });
    return outcome;
  }
}

function otherExecution(claims: Claims | null, executionId: string | null | undefined): Answer | null {
  if (claims === null || claims.execution_id === (executionId ?? "")) return null;
  return json(403, { error: "wrong_execution", detail: "the OE's statement is for another execution than the body's" });
}

export interface ToolPod {
  readonly server: ComponentServer;
  readonly work: WorkRegistry;
}

export function buildToolPod(options: ToolPodOptions): ToolPod {
  const work = new WorkRegistry({ settings: options.drainSettings });
  const remote = new Map<string, ToolSpec>();
  for (const spec of options.app?.tools.values() ?? []) if (!spec.isLocal) remote.set(spec.name, spec);
  const connectors = options.connectors ?? null;
  const surface = toolSurface(connectors?.definitions ?? [], [...remote.values()]);
  for (const spec of remote.values()) {
    const missing = spec.requiredSecrets.filter((name) => !options.secretEnv[name]);
    if (missing.length > 0) {
      throw new Error(
        `tool '${spec.name}' requires the secret env ${missing.join(", ")}, which is not set in the Tool Pod; add it to the Agent's tool secrets (or drop it from requiredSecrets)`,
      );
    }
  }
  const redactor = new Redactor([...Object.values(options.secretEnv), ...(options.extraSecrets ?? [])]);
  // Construction at start-up: each model factory runs once here. A failure is a WARNING (the Tool Pod keeps
  // serving its tools) and is tried again by the next call of that model.
  const models = new Map<string, ModelRunner>();
  const construct = (llmId: string): ModelRunner | undefined => {
    const known = models.get(llmId);
    if (known !== undefined) return known;
    const source = options.app?.models.get(llmId);
    if (source === undefined) return undefined;
    try {
      const made = typeof source === "function" ? source() : source;
      models.set(llmId, made);
      return made;
    } catch (error) {
      logger.warning(redactor.text(`model '${llmId}' could not be constructed: ${error instanceof Error ? error.message : String(error)}`));
      return undefined;
    }
  };
  for (const llmId of options.app?.models.keys() ?? []) construct(llmId);
  const recent = new RecentCalls();
  const pod = options.pod;

  const finish = (settled: Settled, started: number): CallOutcome => {
    const outcome: CallOutcome = {
      status: settled.status,
      result: "result" in settled ? redactor.value(settled.result) : null,
      error: "error" in settled ? (redactor.value(settled.error) as CallError) : null,
      duration_ms: performance.now() - started,
      pod_name: pod.name,
      pod_address: pod.address,
    };
    return outcome;
  };

  /** Tracked when the call names its execution: admitted first (a drained execution runs nothing). */
  const tracked = async <T>(executionId: string | null | undefined, step: number | null | undefined, cancellable: boolean, work_: (signal: AbortSignal | null) => Promise<T>): Promise<T> => {
    if (!executionId) return work_(null);
    const ticket = work.admit(executionId, step ?? null, { cancellable });
    return work.run(ticket, work_);
  };

  const failure = (error: unknown, what: string): Settled => {
    if (error instanceof CallInterrupted || error instanceof ExecutionDraining) {
      return { status: "error", error: { category: error.category, explanation: error.explanation } };
    }
    if (error instanceof Timeout) return { status: "error", error: { category: TIMEOUT, explanation: `${what} did not finish within its timeout` } };
    if (error instanceof ToolError) return { status: "error", error: { category: "tool_message", explanation: error.message } };
    if (error instanceof ModelError) return { status: "error", error: { category: error.category, explanation: error.explanation } };
    const type = error instanceof Error ? error.name : typeof error;
    logger.error(redactor.text(`${what} raised ${type}`), error instanceof Error ? new Error(redactor.text(error.stack ?? error.message)) : undefined);
    return { status: "error", error: { category: TOOL_ERROR, explanation: `${what} failed with ${type}; see the Tool Pod log` } };
  };

  const executeTool = async (call: ToolPodExecuteRequest): Promise<CallOutcome> => {
    const started = performance.now();
    const args = call.arguments ?? {};
    const spec = remote.get(call.tool);
    if (spec === undefined) {
      if (connectors?.has(call.tool)) {
        try {
          const settled = await tracked(call.execution_id, call.step, true, (signal) =>
            connectors.execute(call.tool, args, signal ?? new AbortController().signal),
          );
          return finish(settled, started);
        } catch (error) {
          return finish(failure(error, `connector tool '${call.tool}'`), started);
        }
      }
      return finish({ status: "error", error: { category: UNKNOWN_TOOL, explanation: `the Tool Pod has no tool named '${call.tool}'` } }, started);
    }
    const problems = spec.problems(args);
    if (problems.length > 0) {
      return finish({ status: "error", error: { category: INVALID_ARGUMENTS, explanation: `tool '${spec.name}' arguments are invalid: ${problems.join("; ")}` } }, started);
    }
    try {
      const executionId = call.execution_id ?? null;
      const step = call.step ?? null;
      const value = await tracked(call.execution_id, call.step, spec.abortable, (signal) =>
        withTimeout(
          Promise.resolve().then(() => spec.body(args, signal === null ? { executionId, step } : { executionId, step, signal })),
          spec.timeoutS,
        ),
      );
      const text = JSON.stringify(value);
      return finish({ status: "success", result: text === undefined ? null : JSON.parse(text) }, started);
    } catch (error) {
      if (error instanceof SuspendRequested) {
        return finish({ status: "suspend", result: { reason: error.reason, payload: error.payload ?? null } }, started);
      }
      return finish(failure(error, `tool '${spec.name}'`), started);
    }
  };

  const invokeModel = async (call: InvokeLLMRequest, onDelta: ((delta: ModelDelta) => void) | null = null): Promise<CallOutcome> => {
    const started = performance.now();
    const model = construct(call.llm_id);
    if (model === undefined) {
      const known = [...(options.app?.models.keys() ?? [])];
      return finish(
        {
          status: "error",
          error: {
            category: PROTOCOL_CONSTANTS.UNKNOWN_LLM,
            explanation: `no model is registered under llm id '${call.llm_id}' in the Tool Pod (${known.length ? `registered: ${known.join(", ")}` : "the App registered none: app.model(llmId, runner)"})`,
          },
        },
        started,
      );
    }
    try {
      const message = await tracked(call.execution_id, call.step, true, (signal) => {
        const modelCall = { messages: call.messages, tools: call.tools ?? null, options: call.options ?? null, signal: signal ?? new AbortController().signal };
        return onDelta !== null && model.stream !== undefined ? model.stream(modelCall, onDelta) : model.invoke(modelCall);
      });
      if (typeof message !== "object" || message === null || message["type"] !== "ai") {
        return finish({ status: "error", error: { category: PROTOCOL_CONSTANTS.LLM_ERROR, explanation: `model '${call.llm_id}' did not answer an AI message` } }, started);
      }
      return finish({ status: "success", result: JSON.parse(JSON.stringify(message)) as unknown }, started);
    } catch (error) {
      const settled = failure(error, `model '${call.llm_id}'`);
      if (settled.status === "error" && settled.error.category === TOOL_ERROR) {
        settled.error = { category: PROTOCOL_CONSTANTS.LLM_ERROR, explanation: settled.error.explanation ?? "" };
      }
      return finish(settled, started);
    }
  };

  /** One JSON line per delta (`{"delta": LLMDelta}`) as the model's pieces arrive, then `{"outcome": ...}`:
   * the line format of servers/llm_stream_route.py. Text is redacted on a window per field, so a secret cut
   * across pieces is redacted all the same. A resent call is answered from the memory of recent calls. */
  const streamedModelCall = (call: InvokeLLMRequest, body: string): Answer => {
    const queue: (string | null)[] = [];
    let wake: (() => void) | null = null;
    const put = (line: string | null): void => {
      queue.push(line);
      wake?.();
    };
    const windows = new Map<string, WindowRedactor>();
    const window = (field: string): WindowRedactor => {
      let found = windows.get(field);
      if (found === undefined) windows.set(field, (found = new WindowRedactor(redactor)));
      return found;
    };
    let index = 0;
    const onDelta = (delta: ModelDelta): void => {
      const last = delta.last === true;
      let text = window("content").push(delta.text ?? "");
      const toolCalls = (delta.toolCalls ?? []).map((piece) => ({
        index: piece.index,
        id: piece.id !== undefined ? redactor.text(piece.id) : null,
        name: piece.name !== undefined ? redactor.text(piece.name) : null,
        arguments: window(`tool:${piece.index}`).push(piece.arguments ?? ""),
      }));
      if (last) {
        text += window("content").flush();
        for (const [field, held] of windows) {
          if (!field.startsWith("tool:")) continue;
          const rest = held.flush();
          if (rest) toolCalls.push({ index: Number(field.slice(5)), id: null, name: null, arguments: rest });
        }
      }
      if (!text && toolCalls.length === 0 && !last) return;
      const line = {
        step: call.step ?? null,
        index: index++,
        id: null,
        text,
        extra: {},
        tool_calls: toolCalls,
        finish_reason: delta.finishReason ?? null,
        usage: delta.usage !== undefined ? (redactor.value(delta.usage) as Record<string, unknown>) : null,
        last,
        from_cache: false,
      };
      put(JSON.stringify({ delta: line }) + "\n");
    };
    const outcome = withLogContext(call.execution_id ?? null, call.step ?? null, () =>
      recent.once(INVOKE_LLM_PATH, call.execution_id, call.step, body, () => invokeModel(call, onDelta)),
    );
    outcome.then(
      (result) => {
        put(JSON.stringify({ outcome: result }) + "\n");
        put(null);
      },
      () => put(null), // the stream ends without its outcome line: the OE reports the Tool Pod went away
    );
    async function* lines(): AsyncIterable<string> {
      for (;;) {
        while (queue.length > 0) {
          const line = queue.shift();
          if (line === null || line === undefined) return;
          yield line;
        }
        await new Promise<void>((resolve) => (wake = resolve));
        wake = null;
      }
    }
    return { status: 200, body: undefined, lines: lines(), contentType: NDJSON };
  };

  const routes: Route[] = [
    {
      method: "POST",
      path: TOOL_EXECUTE_PATH,
      handler: async ({ body, claims }) => {
        let call: ToolPodExecuteRequest;
        try {
          call = parseBody("ToolPodExecuteRequest", body);
        } catch (error) {
          if (error instanceof BodyInvalid) return malformed(error, 422);
          throw error;
        }
        const refused = otherExecution(claims, call.execution_id);
        if (refused !== null) return refused;
        // The call, not its credential: a resent call with a new memory statement is the same call.
        const { memory_credential: _credential, ...identity } = call;
        const outcome = await withLogContext(call.execution_id ?? null, call.step ?? null, () =>
          recent.once(TOOL_EXECUTE_PATH, call.execution_id, call.step, JSON.stringify(identity), () => executeTool(call)),
        );
        return json(200, outcome);
      },
    },
    {
      method: "POST",
      path: INVOKE_LLM_PATH,
      handler: async ({ body, claims, accept }) => {
        let call: InvokeLLMRequest;
        try {
          call = parseBody("InvokeLLMRequest", body);
        } catch (error) {
          if (error instanceof BodyInvalid) return malformed(error, 422);
          throw error;
        }
        const refused = otherExecution(claims, call.execution_id);
        if (refused !== null) return refused;
        if (call.stream && accept.includes(NDJSON)) return streamedModelCall(call, body);
        const outcome = await withLogContext(call.execution_id ?? null, call.step ?? null, () =>
          recent.once(INVOKE_LLM_PATH, call.execution_id, call.step, body, () => invokeModel(call)),
        );
        return json(200, outcome);
      },
    },
    { method: "GET", path: TOOLS_PATH, handler: async () => json(200, { tools: surface }) },
    {
      // A connector's test where its credential lives (issue 29); an OpenAPI connector has no test of its
      // own, as servers/tool_calls.py answers.
      method: "POST",
      path: CONNECTOR_TEST_PATH,
      handler: async ({ params }) => {
        const name = params["name"] ?? "";
        if (!(connectors?.definitions ?? []).some((defs) => defs.name === name)) {
          return json(404, { error: "connector_not_found", detail: `this Tool Pod has no connector '${name}'` });
        }
        return json(200, { ok: true, detail: "an OpenAPI connector has no connection test; its calls are checked when made", discovered_tools: null });
      },
    },
    ...workRoutes(work, { appId: options.appId, pod }),
  ];
  const server = new ComponentServer({
    routes,
    guard: { token: options.token, verifier: options.verifier, audience: "tool", workspace: options.appId, tokenOpens: () => false },
    ...(options.bodyTimeoutS !== undefined ? { bodyTimeoutS: options.bodyTimeoutS } : {}),
  });
  return { server, work };
}
