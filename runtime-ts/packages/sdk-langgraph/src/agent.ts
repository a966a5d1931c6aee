// LangGraphBaseAgent (LG-12): runs a compiled graph as one execution of the AER.
//
// - New run: `graph.invoke(input, { configurable: { thread_id } })`, steps numbered 1, 2, 3... A failed
//   turn may have left tool calls unanswered: the input first says they stopped (stopped_tool_call_middleware).
// - Suspension: a governed call the OE holds stops the graph (GraphInterrupt); LangGraph saves the
//   checkpoint, and the run ends SUSPENDED with the OE's payload.
// - Resume: the turn is replayed from the execution's first checkpoint on a new branch (checkpoint_branch.ts),
//   so every call gets the number it had and the OE answers it from its replay cache, running the held one
//   once with the reviewer's decision. No checkpoint to resume from (a memory saver in a restarted process,
//   another replica) is an error naming the fix (CP-07), never a silent fresh start.
// - A node's own interrupt() is held in the OE as a step of kind `interrupt` (suspend.ts); the resumed run
//   replays to it and continues with the reviewer's value.
// - A graph compiled without a checkpointer replays its turn from the input, against the same cache.
import { AIMessage, type BaseMessage } from "@langchain/core/messages";
import { BaseCheckpointSaver } from "@langchain/langgraph-checkpoint";
import { Command } from "@langchain/langgraph";
import { PlatformFailure, SuspendRequested, currentRun, protocol, streamChunk, type RequestContext, type StreamMode } from "@agent-engine/runner";
import { turnStart } from "./checkpoint_branch.js";
import { MONGODB_URI_ENV } from "./checkpointer.js";
import { toPlatform } from "./messages.js";
import { stoppedAnswers } from "./stopped_tool_call_middleware.js";
import { pendingBreakpoint, pendingInterrupt, resumeFor, type NativeHold } from "./suspend.js";

type Run = ReturnType<typeof currentRun>;

/** What the agent needs of a compiled graph (CompiledStateGraph has it). */
export interface CompiledGraphLike {
  invoke(input: unknown, config: Record<string, unknown>): Promise<unknown>;
  stream?(input: unknown, config: Record<string, unknown>): Promise<AsyncIterable<unknown>>;
  getState(config: Record<string, unknown>): Promise<{ values: unknown; next?: readonly string[] }>;
  checkpointer?: unknown;
}

export function isCompiledGraph(value: unknown): value is CompiledGraphLike {
  const graph = value as Partial<CompiledGraphLike> | null;
  return typeof graph === "object" && graph !== null && typeof graph.invoke === "function" && typeof graph.getState === "function";
}

/** A resume found no checkpoint of its own turn (CP-07); the message names the fix. */
export class CheckpointMissingError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "CheckpointMissingError";
  }
}

/** The graph stopped at an interrupt() no OE-governed call asked for. */
export class UngovernedInterruptError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "UngovernedInterruptError";
  }
}

const INTERRUPT_KEY = "__interrupt__";
const GRAPH_MODES: ReadonlySet<string> = new Set(["values", "updates", "messages", "custom"]);

/** The stream modes of the client's request this graph streams (LG-10); empty: the graph is invoked. */
export function streamedModes(context: RequestContext): StreamMode[] {
  return [...new Set((context.streamMode ?? []).filter((mode) => GRAPH_MODES.has(mode)))] as StreamMode[];
}

/** One chunk as the OE's event data: messages as platform dicts (`messages` chunks are [message, metadata]). */
export function chunkData(mode: string, chunk: unknown): unknown {
  if (mode === "messages" && Array.isArray(chunk)) {
    const [message, metadata] = chunk as [unknown, unknown];
    return { message: jsonableState(message), metadata: jsonableState(metadata) };
  }
  return jsonableState(chunk);
}

/** A graph's output as JSON: messages as platform dicts, LangGraph's interrupt marker dropped. */
export function jsonableState(value: unknown): unknown {
  if (typeof value !== "object" || value === null) return value ?? null;
  if (AIMessage.isInstance(value) || (value as Partial<BaseMessage>).getType !== undefined) return toPlatform(value as BaseMessage);
  if (Array.isArray(value)) return value.map(jsonableState);
  const out: Record<string, unknown> = {};
  for (const [key, item] of Object.entries(value)) if (key !== INTERRUPT_KEY) out[key] = jsonableState(item);
  return out;
}

function messagesOf(values: unknown): BaseMessage[] {
  const messages = (values as Record<string, unknown> | null)?.["messages"];
  return Array.isArray(messages) ? (messages as BaseMessage[]) : [];
}

export class LangGraphBaseAgent {
  constructor(
    readonly graph: CompiledGraphLike,
    private readonly threadId: string,
  ) {}

  get checkpointer(): BaseCheckpointSaver | undefined {
    return this.graph.checkpointer instanceof BaseCheckpointSaver ? this.graph.checkpointer : undefined;
  }

  /** One turn of the execution `context` describes, inside the runner's run. */
  async run(input: unknown, context: RequestContext): Promise<unknown> {
    const configurable: Record<string, unknown> = { thread_id: this.threadId };
    const config = { configurable, signal: context.signal };
    const saver = this.checkpointer;
    let graphInput: unknown = input;
    if (context.resume && saver !== undefined) {
      const start = await turnStart(saver, this.threadId, context.executionId);
      if ("missing" in start) throw this.missing(context.executionId, start.missing);
      configurable["checkpoint_id"] = start.checkpointId;
      graphInput = null;
    } else if (saver !== undefined) {
      graphInput = await this.recoveredInput(input, config);
    }
    const run = currentRun("the LangGraph agent's turn");
    const modes = streamedModes(context);
    let result = await this.turn(graphInput, config, modes);
    for (;;) {
      if (run.suspension !== null) throw run.suspension;
      const hold = pendingInterrupt(result) ?? (await this.breakpoint(saver, run));
      if (hold === undefined) break;
      if (saver === undefined) {
        throw new UngovernedInterruptError(
          "the graph stopped at a LangGraph interrupt(), and a graph compiled without a checkpointer cannot " +
            "resume from one: compile it with { checkpointer: app.checkpointer() }",
        );
      }
      // The replayed turn stops here again at the same step: the reviewer's reply continues the graph.
      const resume = await this.decided(run, hold);
      const next = resume === null ? null : new Command({ resume });
      result = await this.turn(next, { configurable: { thread_id: this.threadId }, signal: context.signal }, modes);
    }
    return jsonableState(result);
  }

  /** A static breakpoint the graph stopped at: tasks still to run on the thread's latest checkpoint. */
  private async breakpoint(saver: BaseCheckpointSaver | undefined, run: Run): Promise<NativeHold | undefined> {
    if (saver === undefined || run.platformFailure !== null) return undefined;
    const state = await this.graph.getState({ configurable: { thread_id: this.threadId } });
    return pendingBreakpoint(state.next ?? []);
  }

  /** `invoke`, or `stream` with each chunk of the client's modes sent to the OE as it comes (LG-10); the
   * result either way: the final values, with LangGraph's interrupt marker when the graph stopped at one. */
  private async turn(input: unknown, config: Record<string, unknown>, modes: StreamMode[]): Promise<unknown> {
    if (modes.length === 0) return this.graph.invoke(input, config);
    if (this.graph.stream === undefined) throw new TypeError("the compiled graph has no stream(); it cannot serve stream_mode");
    // values and updates are always read: the final state and an interrupt come from them.
    const streamMode = [...new Set<string>([...modes, "values", "updates"])];
    let values: unknown = null;
    let interrupted: unknown;
    for await (const item of await this.graph.stream(input, { ...config, streamMode })) {
      const [mode, chunk] = item as [string, unknown];
      if (mode === "values") values = chunk;
      if (mode === "updates") interrupted ??= (chunk as Record<string, unknown> | null)?.[INTERRUPT_KEY];
      if ((modes as string[]).includes(mode)) await this.send(mode as StreamMode, chunkData(mode, chunk));
    }
    return interrupted === undefined ? values : { ...(values as Record<string, unknown>), [INTERRUPT_KEY]: interrupted };
  }

  /** One chunk to the OE. After a platform failure the turn is over, but the seed has the client receive
   * the step that failed (its ToolMessage carries the failure text) before the turn's error: those chunks
   * are sent as they come, best effort, without the runner's refusal of calls after a failure. */
  private async send(mode: StreamMode, data: unknown): Promise<void> {
    const run = currentRun("streaming the graph");
    if (run.platformFailure === null) {
      await streamChunk(mode, data);
      return;
    }
    try {
      await run.oe.graphStream({ execution_id: run.context.executionId, mode, data: JSON.parse(JSON.stringify(data ?? null)) as unknown });
    } catch {
      // The turn already ends FAILED with the first failure; a chunk lost now changes nothing.
    }
  }

  /** The `resume` past the graph's pause once the OE has the reviewer's decision (null: continue with no
   * input); until then the pause is held in the OE at a step of its own and the run ends SUSPENDED. */
  private async decided(run: Run, hold: NativeHold): Promise<Record<string, unknown> | null> {
    const step = run.allocateStep();
    const request: protocol.ToolExecuteRequest = {
      execution_id: run.context.executionId,
      step,
      tool: protocol.AGENT_SUSPEND,
      args: { ...hold.args },
    };
    const reply = run.replies.get(step);
    if (reply !== undefined) {
      // Confirmed with the OE by the runner before the run's next call (or its end).
      run.unconfirmed.push([request, reply]);
      return resumeFor(hold, reply, step);
    }
    if (run.platformFailure !== null) throw new PlatformFailure(`an earlier platform failure ended this turn: ${run.platformFailure}`);
    let answer: protocol.ToolExecuteAnswer;
    try {
      answer = await run.oe.toolExecute(request);
    } catch (error) {
      if (error instanceof PlatformFailure) run.platformFailure ??= error.message;
      throw error;
    }
    if (answer.status === "suspend" && answer.step === step) {
      run.suspension = SuspendRequested.fromResult(answer.result, step, protocol.AGENT_SUSPEND);
      throw run.suspension;
    }
    const failure = `the OE answered the graph's ${hold.args.kind} at step ${step} with ${answer.status ?? "no outcome"} instead of holding it for a human`;
    run.platformFailure ??= failure;
    throw new PlatformFailure(failure);
  }

  /** The input, after a stopped-call answer for each tool call a failed turn left unanswered. */
  private async recoveredInput(input: unknown, config: Record<string, unknown>): Promise<unknown> {
    const state = await this.graph.getState(config);
    const stopped = stoppedAnswers(messagesOf(state.values));
    // Only a messages input can carry the answers; any other input goes to the graph as it came.
    if (stopped.length === 0 || typeof input !== "object" || input === null || Array.isArray(input)) return input;
    const record = input as Record<string, unknown>;
    if (!Array.isArray(record["messages"])) return input;
    return { ...record, messages: [...stopped, ...(record["messages"] as unknown[])] };
  }

  private missing(executionId: string, why: "no_checkpoint" | "another_turn"): CheckpointMissingError {
    if (why === "no_checkpoint") {
      return new CheckpointMissingError(
        `resuming execution ${JSON.stringify(executionId)}: no checkpoint for thread ${JSON.stringify(this.threadId)}. ` +
          `A memory checkpointer loses them with the process (or lives in another replica); set ${MONGODB_URI_ENV} ` +
          "for the AER (or CHECKPOINT_SQLITE_PATH on a kept volume)",
      );
    }
    return new CheckpointMissingError(
      `resuming execution ${JSON.stringify(executionId)}: the latest checkpoint of thread ${JSON.stringify(this.threadId)} ` +
        "is not this execution's (another turn ran on the thread since); start a new execution",
    );
  }
}
