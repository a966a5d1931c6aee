// The AER's HTTP surface (RUNNER_MODE=aer, port 8001), as servers/aer.py:
// - POST /execute: 202 {execution_id, state: "running", pod_name, pod_address} at once, the run goes on and
//   ends with POST /executor/callback; 400 names each bad field, 404 for another workspace than APP_ID,
//   409 when it already runs here or is drained (execution_draining), 403 for a statement of another execution.
// - GET /executions/{execution_id}: 200 while this process runs it, else 404.
// - GET /tools: every tool with is_local and sensitive, for the OE's routing and policy.
// - POST /drain, POST /interrupt/call.
// With the OE's public key, POST /execute opens only to the OE's statement for this AER; the runtime token
// still opens the other routes (they give the AER nothing it does not have).
import type { App } from "./app.js";
import { ExecutionDraining } from "./call_errors.js";
import { workRoutes } from "./drain_routes.js";
import { ExecutionConflictError, ExecutionRunner, WorkspaceMismatchError } from "./executions.js";
import { ComponentServer, json, malformed, type Route } from "./http_server.js";
import type { OEApi } from "./oe_client.js";
import { AER_EXECUTE_PATH, BodyInvalid, parseBody, TOOLS_PATH, type AERExecuteRequest } from "./protocol.js";
import type { RuntimeToken } from "./runtime_token.js";
import type { StatementVerifier } from "./statement.js";
import { routedToolSurface, toolSurface, type ConnectorTools } from "./tool_surface.js";
import { WorkRegistry, type DrainSettings, type PodIdentity } from "./work_registry.js";

export interface AEROptions {
  readonly app: App;
  readonly oe: OEApi;
  readonly token: RuntimeToken;
  readonly verifier: StatementVerifier | null;
  readonly appId: string | null;
  readonly pod: PodIdentity;
  readonly drainSettings: DrainSettings;
  readonly connectors?: readonly ConnectorTools[];
  readonly bodyTimeoutS?: number;
}

export interface AER {
  readonly server: ComponentServer;
  readonly runner: ExecutionRunner;
  readonly work: WorkRegistry;
}

export function buildAER(options: AEROptions): AER {
  // The execution's life is its turn here: an interrupt waits for a call only while the turn runs.
  const work = new WorkRegistry({ settings: options.drainSettings, boundedByLife: true });
  const tenantTools = [...options.app.tools.values()];
  const connectors = options.connectors ?? [];
  const surface = routedToolSurface(connectors, tenantTools);
  const runner = new ExecutionRunner(options.app, options.oe, toolSurface(connectors, tenantTools), work, options.appId);
  const pod = options.pod;
  const status = (executionId: string): Record<string, unknown> => ({
    execution_id: executionId,
    state: "running",
    ...(pod.name !== null ? { pod_name: pod.name } : {}),
    ...(pod.address !== null ? { pod_address: pod.address } : {}),
  });
  const routes: Route[] = [
    {
      method: "POST",
      path: AER_EXECUTE_PATH,
      handler: async ({ body, claims }) => {
        let call: AERExecuteRequest;
        try {
          call = parseBody("AERExecuteRequest", body);
        } catch (error) {
          if (error instanceof BodyInvalid) return malformed(error);
          throw error;
        }
        if (claims !== null && claims.execution_id !== call.execution_id) {
          return json(403, { error: "wrong_execution", detail: "the OE's statement is for another execution" });
        }
        try {
          runner.start(call);
        } catch (error) {
          if (error instanceof WorkspaceMismatchError) return json(404, { detail: "this runtime serves another workspace" });
          if (error instanceof ExecutionConflictError) return json(409, { detail: `execution '${call.execution_id}' is already running here` });
          if (error instanceof ExecutionDraining) return json(409, { error: error.category, detail: error.explanation });
          throw error;
        }
        return json(202, status(call.execution_id));
      },
    },
    {
      method: "GET",
      path: "/executions/{execution_id}",
      handler: async ({ params }) => {
        const executionId = params["execution_id"] ?? "";
        return runner.isRunning(executionId)
          ? json(200, status(executionId))
          : json(404, { detail: "this process is not running that execution" });
      },
    },
    { method: "GET", path: TOOLS_PATH, handler: async () => json(200, { tools: surface }) },
    ...workRoutes(work, { appId: options.appId, pod }),
  ];
  const server = new ComponentServer({
    routes,
    guard: {
      token: options.token,
      verifier: options.verifier,
      audience: "aer",
      workspace: options.appId,
      tokenOpens: (path) => path !== AER_EXECUTE_PATH,
    },
    ...(options.bodyTimeoutS !== undefined ? { bodyTimeoutS: options.bodyTimeoutS } : {}),
    metrics: () => `# TYPE agent_engine_executions_running gauge\nagent_engine_executions_running{component="aer"} ${runner.size}\n`,
  });
  return { server, runner, work };
}
