// A framework's stream chunks (LangGraph's `values`, `updates`, `messages`, `custom`) sent to the OE
// (`POST /tool/stream`), which publishes each as an execution event of that mode's name. Only the modes the
// client asked for are sent; a chunk the OE did not take is a platform failure of the turn (LG-08), as a
// lost step would be.
import { currentRun } from "./run_context.js";
import { guarded } from "./oe_exchange.js";
import type { GraphStreamChunk } from "./protocol.js";

export type StreamMode = GraphStreamChunk["mode"];

/** Whether the client asked for `mode` on this run (framework SDKs stream only then). */
export function streamsMode(mode: StreamMode): boolean {
  return (currentRun(`streaming ${mode}`).context.streamMode ?? []).includes(mode);
}

/** Send one chunk of `mode` to the OE; resolves once it was taken (nothing is sent for a mode not asked for). */
export async function streamChunk(mode: StreamMode, data: unknown): Promise<boolean> {
  const run = currentRun(`streaming ${mode}`);
  if (!(run.context.streamMode ?? []).includes(mode)) return false;
  const json: unknown = JSON.parse(JSON.stringify(data ?? null));
  await guarded(run, () => run.oe.graphStream({ execution_id: run.context.executionId, mode, data: json }));
  return true;
}
