// LangGraph's own pauses, `interrupt(value)` and static breakpoints, as holds in the OE (issue 31's contract, seed 002's "interrupts as
// holds"), as pure decisions; agent.ts does the asking.
//
// A node's `interrupt(value)` stops the graph with the interrupt pending. The AER holds it in the OE as an
// agent-level step (tool `agent_suspend`) of kind `interrupt` whose payload is the value: audited, shown to
// reviewers like any hold, and a reviewer may answer it with a `value`. The resumed run replays the turn
// (checkpoint_branch.ts), stops at the same interrupt at the same step, finds the reviewer's reply for that
// step and continues the graph with `Command({ resume: { [interruptId]: value } })`, so `interrupt()`
// returns the reviewer's value. A breakpoint is held the same way (kind `breakpoint`, payload the nodes to
// run next) and an approval continues the graph with no input. A rejection ends the turn with HoldRejected (the reviewer's notes); the
// thread's next turn discards the pending task, as LangGraph does for any new input.

export const INTERRUPT_KIND = "interrupt";
export const BREAKPOINT_KIND = "breakpoint";

/** One pause of the graph: an `interrupt()`, or a static breakpoint (`interruptBefore`/`interruptAfter`),
 * which stops the graph with tasks still to run and no interrupt. */
export interface NativeHold {
  readonly interruptId: string;
  /** The held step's arguments: what the OE fingerprints, audits and shows. */
  readonly args: {
    readonly reason: string;
    readonly payload: unknown;
    readonly kind: typeof INTERRUPT_KIND | typeof BREAKPOINT_KIND;
  };
}

/** The reviewer's answer to a held step, as the OE sends it in `suspend_replies`. */
export interface HoldReply {
  readonly decision: string;
  readonly reviewer_notes?: string | null | undefined;
  readonly value?: unknown;
}

/** A reviewer rejected the graph's interrupt: the turn ends, the thread stays usable. */
export class HoldRejected extends Error {
  constructor(message: string) {
    super(message);
    this.name = "HoldRejected";
  }
}

function jsonable(value: unknown): unknown {
  const text = JSON.stringify(value ?? null);
  return text === undefined ? null : JSON.parse(text);
}

/** The graph's first pending interrupt in an invoke result (`__interrupt__`), or undefined. */
export function pendingInterrupt(result: unknown): NativeHold | undefined {
  const pending = (result as Record<string, unknown> | null)?.["__interrupt__"];
  if (!Array.isArray(pending) || pending.length === 0) return undefined;
  const first = pending[0] as { id?: unknown; value?: unknown };
  return {
    interruptId: typeof first.id === "string" ? first.id : "",
    args: { reason: "interrupt", payload: jsonable(first.value), kind: INTERRUPT_KIND },
  };
}

/** A static breakpoint: the graph stopped before `next` with no interrupt pending; undefined if it ended. */
export function pendingBreakpoint(next: readonly string[]): NativeHold | undefined {
  if (next.length === 0) return undefined;
  return {
    interruptId: "",
    args: { reason: `breakpoint before ${next.join(", ")}`, payload: { next: [...next] }, kind: BREAKPOINT_KIND },
  };
}

/** What continues the graph past the decided hold at `step`: the `resume` of a Command for an interrupt,
 * null (the graph continues with no input) for a breakpoint. */
export function resumeFor(hold: NativeHold, reply: HoldReply, step: number): Record<string, unknown> | null {
  if (reply.decision !== "approved") {
    const notes = reply.reviewer_notes ? `: ${reply.reviewer_notes}` : "";
    throw new HoldRejected(`the reviewer rejected the graph's ${hold.args.kind} at step ${step}${notes}`);
  }
  if (hold.args.kind === BREAKPOINT_KIND) return null;
  return { [hold.interruptId]: reply.value ?? null };
}
