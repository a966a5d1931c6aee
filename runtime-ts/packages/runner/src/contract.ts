// The env/paths contract between the runtime image and the pods the operator renders: the same names as
// agent_runtime/contract.py (test/contract.test.ts reads that file and checks they agree).

export const RUNNER_MODES = ["aer", "tool"] as const;
export type RunnerMode = (typeof RUNNER_MODES)[number];
// Modes the Python image serves that this one does not: refused with the fix, never faked.
export const PYTHON_ONLY_MODES = ["memory", "oe"] as const;

export const PORTS: Readonly<Record<RunnerMode, number>> = { aer: 8001, tool: 8002 };

export const RUNNER_MODE_ENV = "RUNNER_MODE";
export const PORT_OVERRIDE_ENV = "RUNTIME_PORT";
export const ENTRYPOINT_ENV = "AGENT_ENTRYPOINT";
export const APP_HOST_ENV = "APP_HOST";
export const APP_ID_ENV = "APP_ID";
export const STRUCTURED_LOGGING_ENV = "STRUCTURED_LOGGING";
export const OE_URL_ENV = "AGENTIC_OE_URL";
export const TOKEN_FILE_ENV = "RUNTIME_TOKEN_FILE";
export const TOKEN_ENV = "RUNTIME_TOKEN";
export const TOKEN_FILE_PATH = "/etc/agent-engine/token/token";
export const OE_PUBLIC_KEY_FILE_ENV = "AGENTIC_OE_PUBLIC_KEY_FILE";
export const BUNDLE_PATH_ENV = "AGENTIC_CONNECTOR_BUNDLE_PATH";
export const BUNDLE_DIGEST_ENV = "AGENTIC_CONNECTOR_BUNDLE_DIGEST";
export const DRAIN_MAX_DEADLINE_MS_ENV = "RUNNER_DRAIN_MAX_DEADLINE_MS";
export const DRAIN_RECORD_TTL_S_ENV = "RUNNER_DRAIN_RECORD_TTL_S";
export const POD_IP_ENV = "RUNNER_POD_IP";

export const HEALTH_PATH = "/healthz";
export const READY_PATH = "/readyz";
export const METRICS_PATH = "/metrics";
export const UNAUTHENTICATED_PATHS: ReadonlySet<string> = new Set([HEALTH_PATH, READY_PATH, METRICS_PATH]);

const PLATFORM_ENV_PREFIXES = ["AGENTIC_", "AGENT_", "RUNTIME_", "RUNNER_", "KUBERNETES_", "PYTHON", "LC_", "NODE_"];
const PLATFORM_ENV_NAMES: ReadonlySet<string> = new Set([
  "PATH",
  "HOME",
  "HOSTNAME",
  "LANG",
  "TERM",
  "PWD",
  "SHLVL",
  APP_HOST_ENV,
  STRUCTURED_LOGGING_ENV,
  APP_ID_ENV,
  "REQUIRE_PROJECT_SCOPED_DB",
]);
// Kubernetes service links (FOO_SERVICE_HOST, FOO_PORT_80_TCP_ADDR, ...), as contract.py's globs.
const PLATFORM_ENV_PATTERNS = [
  /_SERVICE_HOST$/,
  /_SERVICE_PORT$/,
  /_SERVICE_PORT_/,
  /_PORT_[0-9].*_TCP/,
  /_PORT_[0-9].*_UDP/,
  /_PORT_[0-9].*_SCTP/,
];

/** True for a variable the platform sets; such a variable is never a tenant secret. */
export function isPlatformEnv(name: string): boolean {
  if (PLATFORM_ENV_NAMES.has(name) || PLATFORM_ENV_PREFIXES.some((prefix) => name.startsWith(prefix))) {
    return true;
  }
  return PLATFORM_ENV_PATTERNS.some((pattern) => pattern.test(name));
}

export type Env = Readonly<Record<string, string | undefined>>;

/** The Tool Pod's tenant secrets: its environment minus platform variables. */
export function tenantSecretEnv(env: Env): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(env)) {
    if (value !== undefined && !isPlatformEnv(name)) out[name] = value;
  }
  return out;
}
