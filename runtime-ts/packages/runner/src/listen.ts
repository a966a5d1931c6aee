// Which host a runtime listens on: APP_HOST, else the IPv6 wildcard when the kernel can bind it dual stack
// (IPV6_V6ONLY=0), else 0.0.0.0; the same decision as agent_runtime/listen.py.
import { createServer } from "node:net";
import { APP_HOST_ENV, type Env } from "./contract.js";

export const DUAL_STACK_HOST = "::";
export const IPV4_HOST = "0.0.0.0";

/** `APP_HOST` wins; otherwise dual stack when available, else IPv4 on every interface (pure). */
export function chooseListenHost(options: { appHost: string | undefined; dualStack: boolean }): string {
  const appHost = options.appHost?.trim();
  if (appHost) return appHost;
  return options.dualStack ? DUAL_STACK_HOST : IPV4_HOST;
}

/** True when a socket on `::` with IPV6_V6ONLY=0 can be bound (node's default for `::` when ipv6Only is false). */
export function dualStackAvailable(): Promise<boolean> {
  return new Promise((resolve) => {
    const probe = createServer();
    probe.once("error", () => resolve(false));
    probe.listen({ host: DUAL_STACK_HOST, port: 0, ipv6Only: false, exclusive: true }, () => {
      probe.close(() => resolve(true));
    });
  });
}

/** Probe only when APP_HOST does not decide. */
export async function resolveListenHost(env: Env): Promise<string> {
  const appHost = env[APP_HOST_ENV];
  if (appHost?.trim()) return chooseListenHost({ appHost, dualStack: false });
  return chooseListenHost({ appHost: undefined, dualStack: await dualStackAvailable() });
}
