// LangGraphQueryPlugin's reads (LG-06, LG-13): a session's messages from the checkpoint store, scoped reads
// only. A session id is expanded to its workspace-scoped key alone (`session:workspace`); the raw session
// id, which any workspace could have written in a shared store, is never read once a workspace is known.
// Keys of an agent's own resolver are invisible here, as the seed says.
import type { BaseMessage } from "@langchain/core/messages";
import type { BaseCheckpointSaver } from "@langchain/langgraph-checkpoint";
import { toPlatform, type PlatformMessage } from "./messages.js";
import { scopedThreadId } from "./thread_id.js";

/** The session's messages as platform dicts (empty when the session has no thread in this workspace). */
export async function sessionMessages(
  saver: BaseCheckpointSaver,
  sessionId: string,
  options: { readonly workspaceId: string },
): Promise<PlatformMessage[]> {
  const found = await saver.getTuple({ configurable: { thread_id: scopedThreadId(sessionId, options.workspaceId), checkpoint_ns: "" } });
  const messages = found?.checkpoint.channel_values["messages"];
  return Array.isArray(messages) ? (messages as BaseMessage[]).map((message) => toPlatform(message)) : [];
}
