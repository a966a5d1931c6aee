// The connector core's HTTP guarantees in the TS Tool Pod, against real HTTP servers on loopback: the
// credential comes from env and never comes back, redirects off the connector's origin are refused, the
// response is capped, an abort (drain, interrupt) stops the call.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { OpenApiConnector, retryAfterSeconds, retryWait, sameOriginTarget } from "../src/connector_executor.js";

const SECRET = "conn-secret-9d8c7b6a5f";

function serve(handler: (request: IncomingMessage, response: ServerResponse) => void): Promise<{ server: Server; url: string }> {
  return new Promise((resolve) => {
    const server = createServer(handler);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      resolve({ server, url: `http://127.0.0.1:${typeof address === "object" && address !== null ? address.port : 0}` });
    });
  });
}

function connector(baseUrl: string, auth: Record<string, unknown> = { type: "bearer", env: "ECHO_TOKEN" }): OpenApiConnector {
  const document = {
    name: "echo",
    source: { base_url: baseUrl },
    auth,
    tools: [
      {
        name: "echo_get",
        method: "GET",
        path: "/items/{itemId}",
        params: [
          { name: "itemId", arg: "itemId", in: "path" },
          { name: "q", arg: "q", in: "query" },
        ],
        inputSchema: { type: "object", properties: { itemId: { type: "string" }, q: { type: "string" } }, required: ["itemId"] },
      },
    ],
  };
  return new OpenApiConnector(document as never, { ECHO_TOKEN: SECRET });
}

test("the credential goes on the wire from env and never comes back, even when the provider echoes it", async () => {
  const seen: string[] = [];
  const { server, url } = await serve((request, response) => {
    seen.push(`${request.url ?? ""} ${request.headers.authorization ?? ""}`);
    const status = request.url?.startsWith("/items/bad") ? 401 : 200;
    response.writeHead(status, { "content-type": "application/json" });
    response.end(JSON.stringify({ echoed: request.headers.authorization, message: `denied ${String(request.headers.authorization)}` }));
  });
  try {
    const ok = await connector(url).execute("echo_get", { itemId: "a b", q: "x&y" }, new AbortController().signal);
    assert.equal(ok.status, "success");
    assert.ok(!JSON.stringify(ok).includes(SECRET));
    assert.equal(seen[0], `/items/a%20b?q=x%26y Bearer ${SECRET}`);
    const denied = await connector(url).execute("echo_get", { itemId: "bad" }, new AbortController().signal);
    assert.equal(denied.status, "error");
    assert.ok(denied.status === "error" && denied.error.category === "auth");
    assert.ok(!JSON.stringify(denied).includes(SECRET), JSON.stringify(denied));
    const missing = await connector(url).execute("echo_get", {}, new AbortController().signal);
    assert.ok(missing.status === "error" && missing.error.category === "invalid_arguments");
  } finally {
    server.close();
  }
});

test("a redirect off the connector's origin is refused; one on it is followed", async () => {
  const other = await serve((_, response) => {
    response.writeHead(200, { "content-type": "application/json" });
    response.end(JSON.stringify({ stolen: true }));
  });
  const hits: string[] = [];
  const { server, url } = await serve((request, response) => {
    hits.push(request.url ?? "");
    if (request.url?.startsWith("/items/away")) response.writeHead(302, { location: `${other.url}/collect` }).end();
    else if (request.url?.startsWith("/items/move")) response.writeHead(307, { location: "/items/here" }).end();
    else response.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ at: request.url }));
  });
  let otherHit = false;
  other.server.on("request", () => {
    otherHit = true;
  });
  try {
    const away = await connector(url).execute("echo_get", { itemId: "away" }, new AbortController().signal);
    assert.ok(away.status === "error" && /redirect refused/.test(away.error.explanation ?? ""));
    assert.equal(otherHit, false, "the other origin was never called (with or without the credential)");
    const moved = await connector(url).execute("echo_get", { itemId: "move" }, new AbortController().signal);
    assert.ok(moved.status === "success");
    assert.deepEqual((moved.result as { body: unknown }).body, { at: "/items/here" });
    assert.equal(sameOriginTarget("http://a.test/x", "http://b.test/y"), null);
  } finally {
    server.close();
    other.server.close();
  }
});

test("a response past 200,000 bytes is cut and marked truncated; an abort stops a slow call", async () => {
  const { server, url } = await serve((request, response) => {
    if (request.url?.startsWith("/items/slow")) {
      response.writeHead(200, { "content-type": "application/json" });
      response.write("[");
      return; // never ends
    }
    response.writeHead(200, { "content-type": "application/json" });
    response.end("x".repeat(300_000));
  });
  try {
    const big = await connector(url).execute("echo_get", { itemId: "big" }, new AbortController().signal);
    assert.ok(big.status === "success");
    const result = big.result as { body: string; truncated: boolean };
    assert.equal(result.truncated, true);
    assert.equal(result.body.length, 200_000);
    const controller = new AbortController();
    const slow = connector(url).execute("echo_get", { itemId: "slow" }, controller.signal);
    setTimeout(() => controller.abort(new Error("drained")), 50);
    await assert.rejects(slow, /drained/);
  } finally {
    server.closeAllConnections();
    server.close();
  }
});

test("a credential the Tool Pod's env does not hold, or a platform variable, refuses the start", () => {
  assert.throws(() => new OpenApiConnector({ name: "x", source: { base_url: "http://127.0.0.1:9" }, auth: { type: "bearer", env: "NOPE" }, tools: [] } as never, {}), /not set in the Tool Pod/);
  assert.throws(
    () => new OpenApiConnector({ name: "x", source: { base_url: "http://127.0.0.1:9" }, auth: { type: "bearer", env: "AGENTIC_OE_URL" }, tools: [] } as never, {}),
    /platform variable/,
  );
});

test("a read answered 429 or 503 is retried (Retry-After, at most 3 times); a write never is", async () => {
  let hits = 0;
  const { server, url } = await serve((request, response) => {
    hits += 1;
    if (request.url?.startsWith("/items/busy") && hits <= 2) {
      response.writeHead(503, { "retry-after": "0" }).end();
      return;
    }
    if (request.url?.startsWith("/items/always")) {
      response.writeHead(429, { "retry-after": "0" }).end();
      return;
    }
    response.writeHead(200, { "content-type": "application/json" }).end("{}");
  });
  try {
    const busy = await connector(url).execute("echo_get", { itemId: "busy" }, new AbortController().signal);
    assert.equal(busy.status, "success");
    assert.equal(hits, 3);
    hits = 0;
    const always = await connector(url).execute("echo_get", { itemId: "always" }, new AbortController().signal);
    assert.ok(always.status === "error" && always.error.category === "rate_limited");
    assert.equal(hits, 4, "the first try and 3 retries");
    assert.equal(retryWait("POST", 503, "0", 0), null);
    assert.equal(retryWait("GET", 503, null, 0), 0.5);
    assert.equal(retryWait("GET", 500, "1", 0), null);
    assert.equal(retryAfterSeconds("120"), 30);
    assert.equal(retryAfterSeconds(new Date(Date.now() + 5000).toUTCString(), Date.now()) !== null, true);
  } finally {
    server.close();
  }
});
