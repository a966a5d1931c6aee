#!/usr/bin/env node
// `node .../launcher.js`, the Node image's CMD: RUNNER_MODE picks the component (aer or tool).
//
// Logging is installed first, before the tenant's AGENT_ENTRYPOINT is imported, so every start-up failure is
// one ERROR record (JSON when STRUCTURED_LOGGING=true) and a non-zero exit, never a raw stack trace. SIGTERM
// stops accepting connections, lets runs in flight finish (bounded by SHUTDOWN_TIMEOUT_S) and exits 0: the
// process's shutdown, not the per-execution drain (POST /drain) the OE asks for.
import { isAbsolute, resolve } from "node:path";
import { realpathSync } from "node:fs";
import { fileURLToPath, pathToFileURL } from "node:url";
import { App, isApp } from "./app.js";
import { buildAER } from "./aer.js";
import { BundleError, resolveRuntimeBundle } from "./bundle.js";
import { openApiConnectors } from "./connector_executor.js";
import {
  ENTRYPOINT_ENV,
  PORT_OVERRIDE_ENV,
  PORTS,
  PYTHON_ONLY_MODES,
  RUNNER_MODE_ENV,
  RUNNER_MODES,
  tenantSecretEnv,
  type Env,
  type RunnerMode,
} from "./contract.js";
import { DEFAULT_BODY_TIMEOUT_S, type ComponentServer } from "./http_server.js";
import { resolveListenHost } from "./listen.js";
import { getLogger, setupLogging } from "./logging.js";
import { OEClient, oeUrlFromEnv } from "./oe_client.js";
import { RuntimeToken } from "./runtime_token.js";
import { Redactor } from "./redaction.js";
import { redactStdStreams } from "./stream_redaction.js";
import { verifierFromEnv } from "./statement.js";
import { buildToolPod } from "./tool_pod.js";
import { drainSettingsFromEnv, podIdentityFromEnv, type DrainSettings } from "./work_registry.js";

const logger = getLogger("agent_runtime.launcher");

export const SHUTDOWN_TIMEOUT_S = 25;
export const EXIT_OK = 0;
export const EXIT_STARTUP_FAILED = 1;
export const EXIT_BAD_CONFIG = 2;
export const BODY_TIMEOUT_ENV = "BODY_TIMEOUT_S";

/** The environment does not describe a component this image can start; the message says the fix. */
export class LaunchError extends Error {}

export function selectMode(env: Env): RunnerMode {
  const choices = RUNNER_MODES.join(", ");
  const raw = (env[RUNNER_MODE_ENV] ?? "").trim();
  if (!raw) throw new LaunchError(`${RUNNER_MODE_ENV} is not set; set it to one of: ${choices}`);
  const mode = raw.toLowerCase();
  if ((RUNNER_MODES as readonly string[]).includes(mode)) return mode as RunnerMode;
  if ((PYTHON_ONLY_MODES as readonly string[]).includes(mode)) {
    throw new LaunchError(`${RUNNER_MODE_ENV}=${mode}: the ${mode} is a platform component of the Python image, not built into the Node runtime; this image can run ${choices}`);
  }
  throw new LaunchError(`${RUNNER_MODE_ENV}='${raw}' is not a runner mode; use one of: ${choices}`);
}

export function selectPort(mode: RunnerMode, env: Env): number {
  const raw = (env[PORT_OVERRIDE_ENV] ?? "").trim();
  if (!raw) return PORTS[mode];
  if (!/^[0-9]+$/.test(raw) || !(Number(raw) > 0 && Number(raw) < 65536)) {
    throw new LaunchError(`${PORT_OVERRIDE_ENV}='${raw}' is not a TCP port; use 1-65535 or unset it`);
  }
  return Number(raw);
}

export function selectBodyTimeout(env: Env): number {
  const raw = (env[BODY_TIMEOUT_ENV] ?? "").trim();
  if (!raw) return DEFAULT_BODY_TIMEOUT_S;
  const value = Number(raw);
  if (!(value > 0 && value <= 3600)) throw new LaunchError(`${BODY_TIMEOUT_ENV}='${raw}' is not a number of seconds; use 0.1-3600 or unset it`);
  return value;
}

/** `path/to/module.js[:export]`: a file path (relative to the working directory) or a package name; the
 * export defaults to `app`, then the module's default export. */
export async function loadApp(spec: string): Promise<App> {
  const colon = spec.lastIndexOf(":");
  const hasExport = colon > 0 && !/^[A-Za-z]:[\\/]/.test(spec) && !spec.slice(colon + 1).includes("/");
  const modulePath = hasExport ? spec.slice(0, colon) : spec;
  const exportName = hasExport ? spec.slice(colon + 1) : "app";
  const isPath = modulePath.startsWith(".") || isAbsolute(modulePath) || modulePath.endsWith(".js") || modulePath.endsWith(".mjs");
  const target = isPath ? pathToFileURL(resolve(process.cwd(), modulePath)).href : modulePath;
  const module = (await import(target)) as Record<string, unknown>;
  const candidate = module[exportName] ?? (hasExport ? undefined : module["default"]);
  if (!isApp(candidate)) {
    throw new LaunchError(`${ENTRYPOINT_ENV}=${spec}: the module exports no App named '${exportName}'; export the agent's App (export const app = new App(...))`);
  }
  return candidate;
}

interface Component {
  readonly server: ComponentServer;
  readonly shutdown: () => Promise<void>;
}

async function buildComponent(mode: RunnerMode, env: Env, options: { drain: DrainSettings; port: number; host: string; bodyTimeoutS: number }): Promise<Component> {
  const token = RuntimeToken.fromEnv(env);
  const verifier = verifierFromEnv(env);
  if (verifier === null) {
    logger.warning(
      `no OE public key (AGENTIC_OE_PUBLIC_KEY_FILE): the ${mode} accepts the runtime token from any holder; give the operator AGENT_OPERATOR_OE_PUBLIC_KEY_FILE so that rendered pods mount it`,
    );
  }
  if (mode === "tool") {
    // Before any tenant code runs: every line this process writes loses every form of every secret it holds.
    redactStdStreams(new Redactor([...Object.values(tenantSecretEnv(env)), token.current()]));
  }
  const spec = (env[ENTRYPOINT_ENV] ?? "").trim();
  let tenant: App | null = null;
  if (spec) {
    tenant = await loadApp(spec);
    logger.info(`loaded ${ENTRYPOINT_ENV}=${spec}: ${tenant.tools.size} tool(s)`);
  }
  const bundle = resolveRuntimeBundle(env);
  logger.info(`connector bundle resolved: ${bundle.connectors.length} connector(s), ${bundle.builtins.length} built-in, digest=${bundle.digest ?? "None"}`);
  if (bundle.builtins.length > 0) {
    throw new LaunchError(
      `the bundle holds built-in connector(s) ${bundle.builtins.map((entry) => entry.name).join(", ")}, which the Node runtime does not run; use the Python runtime (spec.runtime: python) for built-in connectors`,
    );
  }
  const connectors = openApiConnectors(bundle.connectors, tenantSecretEnv(env), { checkCredentials: mode === "tool" });
  const appId = env["APP_ID"] || null;
  const pod = podIdentityFromEnv(env, options.host, options.port);
  if (mode === "tool") {
    const toolPod = buildToolPod({
      app: tenant,
      secretEnv: tenantSecretEnv(env),
      // The runtime token is a secret the Tool Pod holds too: no outcome or delta may carry it.
      extraSecrets: [token.current()],
      token,
      verifier,
      appId,
      pod,
      drainSettings: options.drain,
      connectors,
      bodyTimeoutS: options.bodyTimeoutS,
    });
    return { server: toolPod.server, shutdown: async () => undefined };
  }
  if (tenant === null) throw new LaunchError(`${RUNNER_MODE_ENV}=aer needs ${ENTRYPOINT_ENV}=path/to/module.js:app naming the tenant's App`);
  if (tenant.entrypointFunction === null) {
    throw new LaunchError(`${ENTRYPOINT_ENV}=${spec}: the App has no entrypoint; register the agent's main function with app.entrypoint(...)`);
  }
  const aer = buildAER({
    app: tenant,
    oe: new OEClient(oeUrlFromEnv(env), token),
    token,
    verifier,
    appId,
    pod,
    drainSettings: options.drain,
    connectors: connectors.definitions,
    bodyTimeoutS: options.bodyTimeoutS,
  });
  return { server: aer.server, shutdown: () => aer.runner.shutdown(SHUTDOWN_TIMEOUT_S) };
}

function waitForSignal(): Promise<string> {
  return new Promise((resolveSignal) => {
    // `on`, not `once`: a second signal during shutdown must not fall back to node's default kill.
    for (const signal of ["SIGTERM", "SIGINT"] as const) process.on(signal, () => resolveSignal(signal));
  });
}

/** Start the component RUNNER_MODE names; resolves to the process exit code once it stops. */
export async function main(env: Env = process.env): Promise<number> {
  setupLogging(env);
  // Taken before anything starts: a SIGTERM during start-up is a clean stop too, never node's default kill.
  const stopped = waitForSignal();
  let mode: RunnerMode;
  let port: number;
  let drain: DrainSettings;
  let bodyTimeoutS: number;
  try {
    mode = selectMode(env);
    port = selectPort(mode, env);
    drain = drainSettingsFromEnv(env);
    podIdentityFromEnv(env, "", port);
    bodyTimeoutS = selectBodyTimeout(env);
  } catch (error) {
    logger.error(error instanceof Error ? error.message : String(error));
    return EXIT_BAD_CONFIG;
  }
  const host = await resolveListenHost(env);
  let component: Component;
  try {
    component = await buildComponent(mode, env, { drain, port, host, bodyTimeoutS });
  } catch (error) {
    if (error instanceof LaunchError || error instanceof BundleError) {
      logger.error(error.message);
      return EXIT_BAD_CONFIG;
    }
    const message = error instanceof Error ? error.message : String(error);
    logger.error(`${mode} start-up failed: ${message}`, error);
    return EXIT_STARTUP_FAILED;
  }
  logger.info(`listener bind resolved: host=${host}`);
  logger.info(`starting ${mode} on port ${port}`);
  try {
    await component.server.listen(host, port);
  } catch (error) {
    logger.error(`${mode} server failed: ${error instanceof Error ? error.message : String(error)}`, error);
    return EXIT_STARTUP_FAILED;
  }
  component.server.ready = true;
  const signal = await stopped;
  logger.info(`${signal}: shutting down ${mode}`);
  component.server.ready = false;
  const closed = component.server.close();
  await component.shutdown();
  await Promise.race([closed, new Promise((resolveWait) => setTimeout(resolveWait, 1000))]);
  logger.info(`${mode} stopped`);
  return EXIT_OK;
}

/** Whether this module is the process's main one: compared by real path, as the image starts it through a
 * symlink (/opt/agent-engine/runner -> the workspace's dist/src) and node resolves the module's own URL. */
function isMain(): boolean {
  const script = process.argv[1];
  if (!script) return false;
  try {
    return realpathSync(script) === realpathSync(fileURLToPath(import.meta.url));
  } catch {
    return false;
  }
}

if (isMain()) {
  // A tenant promise rejected with no handler must not kill a runtime serving other executions.
  process.on("unhandledRejection", (reason) => logger.error("an unhandled promise rejection (tenant code?)", reason));
  main().then(
    (code) => process.exit(code),
    (error: unknown) => {
      logger.error(`launcher failed: ${error instanceof Error ? error.message : String(error)}`, error);
      process.exit(EXIT_STARTUP_FAILED);
    },
  );
}
