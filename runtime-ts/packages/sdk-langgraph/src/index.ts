// @agent-engine/sdk-langgraph: the LangGraph.js SDK for Agent Engine (public re-exports).
export { App, type AppOptions, type GraphBuilder, type LangChainToolOptions } from "./runtime.js";
export { LangGraphBaseAgent, CheckpointMissingError, UngovernedInterruptError, isCompiledGraph, jsonableState } from "./agent.js";
export { GovernedChatModel, openAIToolChoice, stableMessageId } from "./secure_llm.js";
export { PlatformCheckpointer, type PlatformCheckpointerOptions, type SaveGuard } from "./platform_checkpointer.js";
export { governedTool, toolErrorText, PLATFORM_FAILURE_PREFIX, type ToolSchema, type GovernedCall } from "./durable_tools.js";
export { LangChainModelAdapter } from "./llm_adapter.js";
export { sessionMessages } from "./query.js";
export { fromPlatform, fromPlatformMessages, toPlatform, toPlatformMessages, MessageError, type PlatformMessage } from "./messages.js";
export { EXECUTION_KEY, turnStart } from "./checkpoint_branch.js";
export {
  CheckpointConfigError,
  CheckpointScopeError,
  checkpointSettings,
  describeSettings,
  mongoDbName,
  scopeRefusal,
  type CheckpointSettings,
  type StoreKind,
} from "./checkpointer.js";
export { STOPPED_TEXT, completeStoppedToolCalls, stoppedAnswers } from "./stopped_tool_call_middleware.js";
export { ThreadIdError, defaultThreadId, resolveThreadId, scopedThreadId, type ThreadContext, type ThreadIdResolver } from "./thread_id.js";
