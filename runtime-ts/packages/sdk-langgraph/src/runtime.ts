// The LangGraph App (LG-03): the runner's App plus what a LangGraph.js agent needs.
//
//   const app = new App({ appName: "support-agent" });
//   const model = app.llm(() => new ChatOpenAI({ model: "gpt-4o-mini" }), { llmId: "main" }); // Tool Pod only
//   const lookup = app.tool(lookupTool, { sensitive: true });                           // governed
//   app.entrypoint(() => createReactAgent({ llm: model, tools: [lookup], checkpointer: app.checkpointer() }));
//
// - `app.entrypoint(build)`: `build(ctx)` returns the compiled graph; the AER builds and runs it per
//   execution on the run's thread id (LangGraphBaseAgent).
// - `app.checkpointer()`: the platform checkpointer (one per App), over the store the environment names.
// - `app.resolveThreadId(fn)`: the agent's own thread key, used verbatim.
// - `app.llm(model, { llmId })`: a LangChain chat model registered for the Tool Pod; returns a chat model
//   whose every call goes through the OE. `app.llm(llmId)` is still the runner's platform model.
// - `app.tool(langchainTool, options)`: registers the tool (its body runs where `isLocal` says) and makes
//   the tool object itself governed; `app.tool(options, body)` is the runner's. `app.langchainTools(ctx)`:
//   the Agent's whole tool surface (connector tools too) as governed LangChain tools.
import type { BaseChatModel } from "@langchain/core/language_models/chat_models";
import type { StructuredToolInterface } from "@langchain/core/tools";
import { convertToOpenAITool } from "@langchain/core/utils/function_calling";
import {
  App as RunnerApp,
  PlatformFailure,
  ToolDefinitionError,
  currentRun,
  type Entrypoint,
  type RequestContext,
  type RunContext,
  type SecureWrappedLLM,
  type ToolBody,
  type ToolOptions,
} from "@agent-engine/runner";
import { LangGraphBaseAgent, isCompiledGraph } from "./agent.js";
import { EXECUTION_KEY } from "./checkpoint_branch.js";
import { APP_ID_ENV, CheckpointScopeError, checkpointSettings, scopeRefusal, type Env } from "./checkpointer.js";
import { governedTool, type ToolSchema } from "./durable_tools.js";
import { LangChainModelAdapter } from "./llm_adapter.js";
import { PlatformCheckpointer } from "./platform_checkpointer.js";
import { GovernedChatModel } from "./secure_llm.js";
import { resolveThreadId, type ThreadIdResolver } from "./thread_id.js";

export interface AppOptions {
  readonly appName?: string;
  /** Replaces process.env for the App's settings (tests, embedding). */
  readonly env?: Env;
}

export interface LangChainToolOptions {
  /** The body runs in this AER (after the OE approves each call) instead of the Tool Pod. */
  readonly isLocal?: boolean;
  /** Held for a reviewer by the OE's default policy. */
  readonly sensitive?: boolean;
  readonly timeoutS?: number;
  /** The secrets the body needs in the Tool Pod (the runner's Tool Pod refuses to start without them). */
  readonly requiredSecrets?: readonly string[];
}

/** The graph (or a run function) the entrypoint builds for one execution. */
export type GraphBuilder = (ctx: RequestContext) => unknown;

function maybeRun(): ReturnType<typeof currentRun> | undefined {
  try {
    return currentRun("");
  } catch {
    return undefined;
  }
}

function schemaOf(tool: StructuredToolInterface): Record<string, unknown> {
  const schema = tool.schema as unknown;
  // A zod schema becomes JSON Schema through LangChain's own converter (what the model is offered).
  const json =
    typeof schema === "object" && schema !== null && ("_def" in schema || "_zod" in schema)
      ? { ...(schemaToJson(tool) ?? {}) }
      : { ...((schema as Record<string, unknown> | null) ?? {}) };
  // The dialect marker says nothing the OE, the policy or a model needs.
  delete json["$schema"];
  return { type: "object", properties: {}, ...json };
}

function schemaToJson(tool: StructuredToolInterface): Record<string, unknown> | undefined {
  const fn = (convertToOpenAITool(tool) as { function?: { parameters?: Record<string, unknown> } }).function;
  return fn?.parameters;
}

/** Make `tool`'s own invoke (and its older `call`) the governed tool's: the object the agent holds can no
 * longer run its body without the OE (the Python SDK's registered_tools.govern_in_place). */
function governInPlace(tool: StructuredToolInterface, governed: StructuredToolInterface): void {
  const target = tool as unknown as Record<string, unknown>;
  target["invoke"] = governed.invoke.bind(governed);
  if (typeof target["call"] === "function") target["call"] = (governed as unknown as { call: (...a: unknown[]) => unknown }).call.bind(governed);
}

export class App extends RunnerApp {
  private readonly env: Env;
  private threadResolver: ThreadIdResolver<RequestContext> | undefined;
  private saver: PlatformCheckpointer | undefined;
  private builder: GraphBuilder | undefined;
  private readonly adapters = new Map<string, LangChainModelAdapter>();
  private readonly governed = new Map<string, StructuredToolInterface>();

  constructor(options: AppOptions = {}) {
    super(options.appName ?? "agent");
    this.env = options.env ?? process.env;
  }

  get appName(): string {
    return this.name;
  }

  /** The environment the App reads its settings from (the process's, unless one was given). */
  get environ(): Env {
    return this.env;
  }

  /** Register the builder: `build(ctx)` returns the compiled graph (or a promise of it). In a LangGraph App
   * the function is always a builder (the first overload only keeps the runner's signature). */
  override entrypoint(fn: Entrypoint): this;
  override entrypoint(build: GraphBuilder): this;
  override entrypoint(build: GraphBuilder | Entrypoint): this {
    if (typeof build !== "function") throw new ToolDefinitionError("app.entrypoint takes a function that builds the graph");
    this.builder = build as GraphBuilder;
    return super.entrypoint((input: unknown, context: RunContext) => this.runTurn(input, context));
  }

  private async runTurn(input: unknown, context: RequestContext): Promise<unknown> {
    const build = this.builder;
    if (build === undefined) throw new ToolDefinitionError(`app ${JSON.stringify(this.name)} has no entrypoint`);
    const built: unknown = await build(context);
    if (isCompiledGraph(built)) return new LangGraphBaseAgent(built, this.threadId(context)).run(input, context);
    if (typeof built === "function") return (built as (value: unknown) => unknown)(input);
    throw new ToolDefinitionError(
      `the entrypoint returned ${built === null ? "null" : typeof built}; return the compiled graph ` +
        "(graph.compile({ checkpointer: app.checkpointer() })) or an async run(input) function",
    );
  }

  /** The platform checkpointer: pass it to `graph.compile({ checkpointer })`. One per App. */
  checkpointer(): PlatformCheckpointer {
    if (this.saver === undefined) {
      this.saver = PlatformCheckpointer.fromSettings(checkpointSettings(this.env), {
        saveGuard: (what) => {
          const failure = maybeRun()?.platformFailure ?? null;
          return failure === null ? undefined : new PlatformFailure(`checkpoint ${what} refused after a platform failure in this turn: ${failure}`);
        },
        // LangGraph.js copies no run metadata into checkpoints: each save names its execution here.
        stamp: () => {
          const run = maybeRun();
          return run === undefined ? undefined : { [EXECUTION_KEY]: run.context.executionId };
        },
      });
    }
    return this.saver;
  }

  /** Use `fn(ctx)` as the thread id, verbatim, for new and resumed runs (no workspace suffix). */
  resolveThreadId(fn: ThreadIdResolver<RequestContext>): this {
    if (typeof fn !== "function") throw new ToolDefinitionError(`app.resolveThreadId takes a function, got ${typeof fn}`);
    this.threadResolver = fn;
    return this;
  }

  get hasThreadResolver(): boolean {
    return this.threadResolver !== undefined;
  }

  /** The checkpoint thread id of the execution `ctx` describes (fails closed without APP_ID when managed). */
  threadId(ctx: RequestContext): string {
    const refusal = scopeRefusal(this.env);
    if (refusal !== undefined) throw new CheckpointScopeError(refusal);
    return resolveThreadId(ctx, { resolver: this.threadResolver, appId: (this.env[APP_ID_ENV] ?? "").trim() });
  }

  /** `app.llm(chatModel, { llmId })` (or a factory of it): register a LangChain chat model for the Tool Pod
   * and return the governed chat model the graph calls. Call it at the module's top level: the Tool Pod
   * builds its models at start-up from what the App registered. A factory runs only in the Tool Pod, so
   * the AER never constructs a model that wants a key. `app.llm(llmId)`: the runner's platform model. */
  override llm(llmId?: string): SecureWrappedLLM;
  override llm(model: BaseChatModel | (() => BaseChatModel), options?: { readonly llmId?: string }): GovernedChatModel;
  override llm(
    model?: string | BaseChatModel | (() => BaseChatModel),
    options: { readonly llmId?: string } = {},
  ): SecureWrappedLLM | GovernedChatModel {
    if (model === undefined || typeof model === "string") return super.llm(model);
    if (model instanceof GovernedChatModel) throw new ToolDefinitionError(`model ${JSON.stringify(model.llmId)} is already governed; pass the model it wraps to app.llm`);
    const isFactory = typeof model === "function" && !("invoke" in model);
    if (!isFactory && typeof (model as { invoke?: unknown }).invoke !== "function") {
      throw new ToolDefinitionError("app.llm takes a LangChain chat model, a function returning one, or an llm id");
    }
    const llmId = options.llmId ?? "default";
    const secure = super.llm(llmId);
    const adapter = this.adapters.get(llmId);
    if (adapter === undefined) {
      const created = new LangChainModelAdapter(isFactory ? (model as () => BaseChatModel) : (model as BaseChatModel));
      this.model(llmId, created);
      this.adapters.set(llmId, created);
    } else {
      // A builder that registers its model per execution: the latest stands (the Tool Pod registered its
      // own at start-up; the AER never calls the model itself).
      adapter.replace(model);
    }
    return new GovernedChatModel(llmId, secure);
  }

  /** `app.tool(langchainTool, options)`: register it and make the tool itself governed: from now on every
   * call of it goes through the OE, so handing either the tool or what this returns (the same object) to
   * createReactAgent or ToolNode is safe. `app.tool(options, body)`: the runner's registration (its
   * LangChain form: `app.governedTool(name)`). */
  override tool(options: ToolOptions, body: ToolBody): this;
  override tool(tool: StructuredToolInterface, options?: LangChainToolOptions): StructuredToolInterface;
  override tool(first: ToolOptions | StructuredToolInterface, second?: ToolBody | LangChainToolOptions): this | StructuredToolInterface {
    if (typeof second === "function") return super.tool(first as ToolOptions, second);
    const tool = first as StructuredToolInterface;
    if (typeof tool.invoke !== "function" || typeof tool.name !== "string") {
      throw new ToolDefinitionError("app.tool takes a LangChain tool and its options, or the runner's (options, body)");
    }
    const options = (second ?? {}) as LangChainToolOptions;
    // Taken before the tool is governed in place (below): the body is the tool's own `call` (which its
    // invoke calls too), bound to the prototype's method, so the patched instance methods never reach it.
    const body = (tool as unknown as { call: (args: Record<string, unknown>) => Promise<unknown> }).call.bind(tool);
    if (!tool.description?.trim()) throw new ToolDefinitionError(`tool ${JSON.stringify(tool.name)} has no description; the model needs one`);
    super.tool(
      {
        name: tool.name,
        description: tool.description.trim(),
        inputSchema: schemaOf(tool),
        ...(options.isLocal !== undefined ? { isLocal: options.isLocal } : {}),
        ...(options.sensitive !== undefined ? { sensitive: options.sensitive } : {}),
        ...(options.timeoutS !== undefined ? { timeoutS: options.timeoutS } : {}),
        ...(options.requiredSecrets !== undefined ? { requiredSecrets: options.requiredSecrets } : {}),
      },
      // The body is the tool as it was, run where isLocal says, after the OE's approval.
      async (args) => body(args),
    );
    const governed = this.governedTool(tool.name);
    governInPlace(tool, governed);
    return tool;
  }

  /** The governed LangChain tool for a tool this App registered. */
  governedTool(name: string): StructuredToolInterface {
    const spec = this.tools.get(name);
    if (spec === undefined) throw new ToolDefinitionError(`no tool named ${JSON.stringify(name)} in this App`);
    let found = this.governed.get(name);
    if (found === undefined) {
      found = governedTool(spec.schema() as unknown as ToolSchema, (tool, args) => this.callTool(tool, args));
      this.governed.set(name, found);
    }
    return found;
  }

  /** The Agent's tools (connectors and this App's) as governed LangChain tools, from the run's context. */
  langchainTools(ctx: RequestContext, names?: readonly string[]): StructuredToolInterface[] {
    const surface = new Map(ctx.tools.map((entry) => [String(entry["name"]), entry as unknown as ToolSchema]));
    const wanted = names ?? [...surface.keys()];
    const missing = wanted.filter((name) => !surface.has(name));
    if (missing.length > 0) {
      throw new ToolDefinitionError(
        `no tool named ${missing.map((n) => JSON.stringify(n)).join(", ")} in this Agent; it has ` +
          `${[...surface.keys()].sort().join(", ") || "none"} (connector tools come from the Agent's Connectors)`,
      );
    }
    return wanted.map((name) => governedTool(surface.get(name) as ToolSchema, (tool, args) => this.callTool(tool, args)));
  }
}
