// Where a resumed turn starts again: the execution's first checkpoint on its thread (CP-06, CP-07).
//
// A resumed run replays its turn from the start, as the seed says of LangGraph on Agent Engine: LangGraph
// continues from the execution's first checkpoint (source "input": its input already written) with no new
// input, a new branch of the thread, and the calls get the numbers they had, 1, 2, 3..., so the OE answers
// each from its replay cache and runs only the one it held, once, with the reviewer's decision.
//
// The platform checkpointer stamps every checkpoint it saves with the execution that saved it
// (EXECUTION_KEY; LangGraph.js copies no run metadata into checkpoints itself). A saver of the agent's own
// stamps nothing: the thread's latest input checkpoint is then taken as the turn's start.
import type { BaseCheckpointSaver, CheckpointTuple } from "@langchain/langgraph-checkpoint";

export const EXECUTION_KEY = "agent_engine_execution_id";
const INPUT = "input";

export type TurnStart = { readonly checkpointId: string } | { readonly missing: "no_checkpoint" | "another_turn" };

function owner(found: CheckpointTuple): unknown {
  return (found.metadata as Record<string, unknown> | undefined)?.[EXECUTION_KEY];
}

function isRoot(found: CheckpointTuple): boolean {
  return (found.config.configurable?.["checkpoint_ns"] ?? "") === "";
}

/** The id of `executionId`'s first checkpoint on the thread, or why there is none to resume from. */
export async function turnStart(saver: BaseCheckpointSaver, threadId: string, executionId: string): Promise<TurnStart> {
  let start: string | undefined;
  let latestSeen = false;
  let stamped = true;
  for await (const found of saver.list({ configurable: { thread_id: threadId, checkpoint_ns: "" } })) {
    if (!isRoot(found)) continue;
    if (!latestSeen) {
      latestSeen = true;
      stamped = owner(found) !== undefined;
      if (stamped && owner(found) !== executionId) return { missing: "another_turn" };
    }
    if (stamped && owner(found) !== executionId) break; // newest first: the execution's checkpoints end here
    if (found.metadata?.source === INPUT) {
      start = found.checkpoint.id;
      if (!stamped) break; // a saver of the agent's own: its latest turn
    }
  }
  if (!latestSeen) return { missing: "no_checkpoint" };
  return start === undefined ? { missing: "another_turn" } : { checkpointId: start };
}
