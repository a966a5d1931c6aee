// The seed's rank table of the SDK's files (seed 002, LG-02), enforced: each line is a rank, top to bottom,
// and a file may import only files on lower lines ("Un archivo solo puede importar de archivos en líneas
// inferiores en este árbol. Las importaciones en sentido contrario son errores."). Imports within one line
// are upward too, so they are refused as well. A file of src/ that the table does not rank is an error
// until it is given a rank here. Files the table names that are not built yet keep their rank.
const RANKS = [
  ["index.ts"],
  ["runtime.ts"],
  ["agent.ts"],
  ["session_factory.ts"],
  ["durable_session.ts"],
  ["deep_agent.ts", "execution_session.ts", "secure_llm.ts", "backends/toolpod.ts"],
  ["deep_agent_checkpointer.ts", "durable_deep_agent.ts", "durable_subgraphs.ts", "session_fork.ts"],
  ["platform_checkpointer.ts"],
  ["workflow_state.ts"],
  ["durable_tools.ts", "llm_adapter.ts", "query.ts", "suspend.ts", "workflow_message.ts"],
  [
    "messages.ts",
    "checkpoint_branch.ts",
    "checkpointer.ts",
    "deep_agent_task.ts",
    "durable_message_identity.ts",
    "node_logger_adapter.ts",
    "stopped_tool_call_middleware.ts",
    "subagents.ts",
    "thread_id.ts",
    "backends/tool_sandbox.ts",
    "workflow_json.ts",
  ],
];

const escape = (name) => name.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&");
const files = (names) => `(^|/)src/(${names.map(escape).join("|")})$`;
const all = files(RANKS.flat());

const rules = RANKS.map((line, index) => ({
  name: `rank-${index + 1}-imports-upward`,
  comment: `${line.join(", ")} (rank ${index + 1}) may import only files of ranks ${index + 2} and below`,
  severity: "error",
  from: { path: files(line) },
  to: { path: files(RANKS.slice(0, index + 1).flat()) },
}));
rules.push(
  {
    name: "unranked-file",
    comment: "every file of src/ has a rank in the seed's table (.dependency-cruiser.cjs RANKS)",
    severity: "error",
    from: { path: "(^|/)src/" },
    to: { path: "(^|/)src/", pathNot: all },
  },
  {
    name: "unranked-importer",
    comment: "every file of src/ has a rank in the seed's table (.dependency-cruiser.cjs RANKS)",
    severity: "error",
    from: { path: "(^|/)src/", pathNot: all },
    to: { path: "(^|/)src/" },
  },
);

module.exports = {
  forbidden: rules,
  options: {
    doNotFollow: { path: "node_modules" },
    exclude: { path: "(^|/)(dist|node_modules)/" },
    tsPreCompilationDeps: true,
    // NodeNext sources import "./x.js" for ./x.ts: TypeScript's own resolution says so.
    tsConfig: { fileName: "tsconfig.json" },
  },
};
