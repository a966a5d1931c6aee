// LangGraph's own `interrupt(value)` as a hold in the OE (issue 31's contract, seed 002's "interrupts as
// holds"), as pure decisions; agent.ts does the asking.
//
// A node's `interrupt(value)` stops the graph with the interrupt pending. The AER holds it in the OE as an
// agent-level step (tool `agent_suspend`) of kind `interrupt` whose payload is the value: audited, shown to
// reviewers like any hold, and a reviewer may answer it with a `value`. The resumed run replays the turn
// (checkpoint_branch.ts), stops at the same interrupt at the same step, finds the reviewer's reply for that
// step and continues the graph with `Command({ resume: { [interruptId]: value } })`, so `interrupt()`
// returns the reviewer's value. A rejection ends the turn with HoldRejected (the reviewer's notes); the
// thread's next turn discards the pending task, as LangGraph does for any new input.

export const INTERRUPT_KIND = "interrupt";

/** One `interrupt()` the graph stopped at. */
export interface NativeHold {
  readonly interruptId: string;
  /** The held step's arguments: what the OE fingerprints, audits and shows. */
  readonly args: { readonly reason: string; readonly payload: unknown; readonly kind: typeof INTERRUPT_KIND };
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

/** What continues the graph past the decided hold at `step`: the `resume` of a Command. */
export function resumeFor(hold: NativeHold, reply: HoldReply, step: number): Record<string, unknown> {
  if (reply.decision !== "approved") {
    const notes = reply.reviewer_notes ? `: ${reply.reviewer_notes}` : "";
    throw new HoldRejected(`the reviewer rejected the graph's interrupt at step ${step}${notes}`);
  }
  return { [hold.interruptId]: reply.value ?? null };
}
