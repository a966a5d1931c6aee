// The framework-agnostic core a TS agent is made of: tools, one entrypoint and its models. Framework SDKs
// (@agent-engine/sdk-langgraph) build on it; the launcher loads the module AGENT_ENTRYPOINT names and takes
// the App it exports.
//
// Cancellation is TypeScript's: a tool declared `abortable: true` receives an AbortSignal and is aborted by
// a drain or an interrupt of its call; a plain tool function gets no signal, and the runtime says so honestly
// (`not_cancellable`, `timed_out`). The entrypoint gets the turn's signal.
import { Ajv2020, type ValidateFunction } from "ajv/dist/2020.js";
import { currentRun, maybeRun, type RunContext } from "./run_context.js";
import { SuspendRequested } from "./sdk_errors.js";
import { callTool } from "./secure_tool.js";
import { SecureWrappedLLM } from "./secure_llm.js";
import { suspendInAgent } from "./agent_suspend.js";
import { isPlatformEnv } from "./contract.js";
import type { ModelRunner } from "./model.js";

/** A model, or how to make it: a factory runs only in the Tool Pod, at its start-up construction. */
export type ModelSource = ModelRunner | (() => ModelRunner);

export const DEFAULT_TOOL_TIMEOUT_S = 30;
const TOOL_NAME = /^[A-Za-z0-9_-]{1,64}$/;
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const LLM_ID = /^[A-Za-z0-9_.:-]{1,256}$/;

export class ToolDefinitionError extends Error {}

export interface ToolCallContext {
  readonly executionId: string | null;
  readonly step: number | null;
  /** Present only for a tool declared `abortable: true`. */
  readonly signal?: AbortSignal;
}

export type ToolBody = (args: Record<string, unknown>, context: ToolCallContext) => unknown;

export interface ToolOptions {
  readonly name: string;
  readonly description?: string;
  readonly inputSchema?: Record<string, unknown>;
  readonly isLocal?: boolean;
  readonly sensitive?: boolean;
  readonly requiredSecrets?: readonly string[];
  readonly timeoutS?: number;
  /** The body takes `context.signal` and stops when it is aborted (a drain, an interrupt of its call). */
  readonly abortable?: boolean;
}

const ajv = new Ajv2020({ allErrors: true, strict: false });

export class ToolSpec {
  readonly name: string;
  readonly description: string;
  readonly inputSchema: Record<string, unknown>;
  readonly isLocal: boolean;
  readonly sensitive: boolean;
  readonly requiredSecrets: readonly string[];
  readonly timeoutS: number;
  readonly abortable: boolean;
  private readonly check: ValidateFunction;

  constructor(
    options: ToolOptions,
    readonly body: ToolBody,
  ) {
    if (!TOOL_NAME.test(options.name)) {
      throw new ToolDefinitionError(`tool name ${JSON.stringify(options.name)} must be 1-64 letters, digits, '_' or '-'`);
    }
    this.name = options.name;
    this.description = options.description ?? "";
    this.inputSchema = options.inputSchema ?? { type: "object", properties: {} };
    this.isLocal = options.isLocal ?? false;
    this.sensitive = options.sensitive ?? false;
    this.timeoutS = options.timeoutS ?? DEFAULT_TOOL_TIMEOUT_S;
    this.abortable = options.abortable ?? false;
    this.requiredSecrets = [...(options.requiredSecrets ?? [])];
    for (const secret of this.requiredSecrets) {
      if (!ENV_NAME.test(secret)) {
        throw new ToolDefinitionError(`tool '${this.name}': requiredSecrets entry '${secret}' is not an environment variable name`);
      }
      if (isPlatformEnv(secret)) {
        throw new ToolDefinitionError(
          `tool '${this.name}': requiredSecrets entry '${secret}' is a platform variable name, never a tenant secret; rename the secret's env var`,
        );
      }
    }
    if (this.requiredSecrets.length > 0 && this.isLocal) {
      throw new ToolDefinitionError(
        `tool '${this.name}': a local tool runs in the AER, which receives LLM keys only; drop isLocal so it runs in the Tool Pod with its requiredSecrets`,
      );
    }
    if (!(this.timeoutS > 0)) throw new ToolDefinitionError(`tool '${this.name}': timeoutS must be a positive number of seconds`);
    try {
      this.check = ajv.compile(this.inputSchema);
    } catch (error) {
      throw new ToolDefinitionError(`tool '${this.name}': inputSchema is not a JSON Schema (${String(error)})`);
    }
  }

  schema(): Record<string, unknown> {
    return { name: this.name, description: this.description, inputSchema: this.inputSchema };
  }

  /** The arguments' problems against inputSchema, as `field: problem` (empty when valid). */
  problems(args: Record<string, unknown>): string[] {
    if (this.check(args)) return [];
    return (this.check.errors ?? []).map((error) => {
      const path = error.instancePath.split("/").filter(Boolean);
      if (error.keyword === "required") path.push(String(error.params["missingProperty"]));
      return `${path.join(".") || "(arguments)"}: ${error.message ?? error.keyword}`;
    });
  }
}

export type Entrypoint = (input: unknown, run: RunContext) => unknown;

export class App {
  private readonly toolSpecs = new Map<string, ToolSpec>();
  private entry: Entrypoint | null = null;
  private readonly llms = new Map<string, SecureWrappedLLM>();
  private readonly modelRunners = new Map<string, ModelSource>();

  constructor(readonly name = "agent") {}

  /** Register a tool; returns the App so definitions chain. */
  tool(options: ToolOptions, body: ToolBody): this {
    if (this.toolSpecs.has(options.name)) throw new ToolDefinitionError(`tool '${options.name}' is defined twice`);
    this.toolSpecs.set(options.name, new ToolSpec(options, body));
    return this;
  }

  /** The agent's main function: called once per run with the execution's input. */
  entrypoint(fn: Entrypoint): this {
    if (this.entry !== null) throw new ToolDefinitionError("the App already has an entrypoint; an App has one");
    this.entry = fn;
    return this;
  }

  get entrypointFunction(): Entrypoint | null {
    return this.entry;
  }

  get tools(): ReadonlyMap<string, ToolSpec> {
    return this.toolSpecs;
  }

  /** Call any tool (local, remote tenant or connector) through the OE, from the entrypoint's run. */
  callTool(name: string, args: Record<string, unknown> = {}): Promise<unknown> {
    const spec = this.toolSpecs.get(name);
    return callTool(currentRun(`calling tool '${name}'`), name, args, spec?.isLocal ? spec : null);
  }

  /** The model registered under `llmId`, governed: each call asks the OE, which runs it in the Tool Pod. */
  llm(llmId = "default"): SecureWrappedLLM {
    if (!LLM_ID.test(llmId)) throw new ToolDefinitionError(`llm id ${JSON.stringify(llmId)} must be 1-256 of A-Z a-z 0-9 _ . : -`);
    let found = this.llms.get(llmId);
    if (found === undefined) {
      found = new SecureWrappedLLM(llmId);
      this.llms.set(llmId, found);
    }
    return found;
  }

  /** The model the Tool Pod runs for `llmId` (where the model key lives); the AER never calls it itself.
   * Give a factory (`() => ChatCompletionsModel.fromEnv()`) when making it needs the Tool Pod's env. */
  model(llmId: string, runner: ModelSource): this {
    if (!LLM_ID.test(llmId)) throw new ToolDefinitionError(`llm id ${JSON.stringify(llmId)} must be 1-256 of A-Z a-z 0-9 _ . : -`);
    if (this.modelRunners.has(llmId)) throw new ToolDefinitionError(`model '${llmId}' is registered twice`);
    this.modelRunners.set(llmId, runner);
    return this;
  }

  get models(): ReadonlyMap<string, ModelSource> {
    return this.modelRunners;
  }

  /** Hold the run for a human: in agent code a step of its own (on the resumed run, the human's decision);
   * in a tool body, that tool's call is held (its resumed step answers with the decision). */
  suspend(reason: string, payload: unknown = null): { decision: string; reviewer_notes: string | null } {
    const run = maybeRun();
    if (run === null) throw new SuspendRequested(reason, payload, null, null);
    return suspendInAgent(run, reason, payload);
  }
}

/** Whether `value` is an App (duck-typed: a framework SDK's App extends this one). */
export function isApp(value: unknown): value is App {
  return value instanceof App;
}
