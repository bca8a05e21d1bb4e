// Offline tests of the writ OpenClaw plugin: recorded OpenClaw hook
// events against a stand-in sidecar on a real unix socket.

import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

import plugin from "../index.js";
import { createWritHooks, configProblem, agentOfSession } from "../writ.js";

const here = path.dirname(fileURLToPath(import.meta.url));
/** @param {string} name */
const fixture = (name) => JSON.parse(fs.readFileSync(path.join(here, "fixtures", name), "utf8"));
const answers = fixture("answers.json");

/**
 * A stand-in sidecar: answer(request) returns the line to send (an object
 * is sent as JSON), null to say nothing, or "close" to hang up.
 * @param {(req: any) => any} answer
 */
async function fakeSidecar(answer) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "writ-oc-"));
  const socket = path.join(dir, "w1.sock");
  /** @type {any[]} */
  const requests = [];
  const server = net.createServer((conn) => {
    let buf = "";
    conn.setEncoding("utf8");
    conn.on("data", (chunk) => {
      buf += chunk;
      let nl;
      while ((nl = buf.indexOf("\n")) >= 0) {
        const req = JSON.parse(buf.slice(0, nl));
        buf = buf.slice(nl + 1);
        requests.push(req);
        const a = answer(req);
        if (a === "close") conn.destroy();
        else if (a !== null) conn.write((typeof a === "string" ? a : JSON.stringify(a)) + "\n");
      }
    });
    conn.on("error", () => {});
  });
  await new Promise((resolve) => server.listen(socket, () => resolve(undefined)));
  return {
    socket,
    requests,
    close: () =>
      new Promise((resolve) => {
        server.close(() => {
          fs.rmSync(dir, { recursive: true, force: true });
          resolve(undefined);
        });
      }),
  };
}

/** @param {string} socket @param {object} [extra] */
function config(socket, extra = {}) {
  return {
    socket,
    timeoutMs: 2000,
    agents: { main: { worker: "w1", lane: "coordinator" }, research: { worker: "w1", lane: "isolated" } },
    ...extra,
  };
}

test("permit: the call runs (no result), and the sidecar saw the call as the protocol says", async () => {
  const s = await fakeSidecar(() => answers.permit);
  try {
    const { event, ctx } = fixture("exec-before.json");
    const r = await createWritHooks(config(s.socket)).beforeToolCall(event, ctx);
    assert.equal(r, undefined);
    assert.equal(s.requests.length, 1);
    const req = s.requests[0];
    assert.equal(req.v, 1);
    assert.equal(req.op, "openclaw.before");
    assert.equal(req.worker, "w1");
    assert.ok(req.timeout_ms > 0 && req.timeout_ms < 2000);
    assert.deepEqual(req.body, {
      lane: "coordinator",
      session: "agent:main:main",
      tool: "exec",
      call_id: "call_01HX3",
      params: { command: "ls -la", workdir: "/srv/work" },
      cwd: "/srv/work",
    });
  } finally {
    await s.close();
  }
});

test("deny: blocked with writ's reason and the next step", async () => {
  const s = await fakeSidecar(() => answers.deny);
  try {
    const { event, ctx } = fixture("research-exec-before.json");
    const r = await createWritHooks(config(s.socket)).beforeToolCall(event, ctx);
    assert.equal(r.block, true);
    assert.match(r.blockReason, /writ denied this Bash call: denied_by_policy/);
    assert.match(r.blockReason, /Next step: none: do not retry/);
    assert.equal(s.requests[0].body.lane, "isolated");
  } finally {
    await s.close();
  }
});

test("unknown agent: blocked without asking, never a default lane", async () => {
  const s = await fakeSidecar(() => answers.permit);
  try {
    const { event, ctx } = fixture("unknown-agent-before.json");
    const r = await createWritHooks(config(s.socket)).beforeToolCall(event, ctx);
    assert.equal(r.block, true);
    assert.match(r.blockReason, /agent "intruder" has no writ worker and lane/);
    assert.equal(s.requests.length, 0);
    const noAgent = await createWritHooks(config(s.socket)).beforeToolCall(event, { ...ctx, agentId: undefined });
    assert.equal(noAgent.block, true);
  } finally {
    await s.close();
  }
});

test("approval without a reviewer: blocked with the review's caption", async () => {
  const s = await fakeSidecar(() => answers.approval);
  try {
    const { event, ctx } = fixture("held-exec-before.json");
    const r = await createWritHooks(config(s.socket)).beforeToolCall(event, ctx);
    assert.equal(r.block, true);
    assert.match(r.blockReason, /writ review rv-0123456789abcdef0123: Bash/);
    assert.match(r.blockReason, /No writ reviewer is configured/);
  } finally {
    await s.close();
  }
});

test("approval with a reviewer: requireApproval offering allow-once and deny; allow-once is forwarded as the reviewer", async () => {
  const s = await fakeSidecar((req) => (req.op === "openclaw.resolve" ? answers.resolved : answers.approval));
  try {
    const { event, ctx } = fixture("held-exec-before.json");
    const pwDir = fs.mkdtempSync(path.join(os.tmpdir(), "writ-oc-pw-"));
    const passwordFile = path.join(pwDir, "gateway-ops.password");
    fs.writeFileSync(passwordFile, "ops-secret\n", { mode: 0o600 });
    const reviewer = { user: "gateway-ops", passwordFile };
    const r = await createWritHooks(config(s.socket, { reviewer })).beforeToolCall(event, ctx);
    const ra = r.requireApproval;
    assert.ok(ra, "want requireApproval");
    assert.equal(r.block, undefined);
    assert.deepEqual(ra.allowedDecisions, ["allow-once", "deny"]);
    assert.equal(ra.timeoutBehavior, "deny", "an unanswered request must be a denial");
    assert.equal(ra.keepPendingWithoutRoute, false);
    assert.equal(ra.pluginId, "writ");
    assert.ok(ra.title.length <= 80 && ra.title.includes("rv-0123456789abcdef0123"), ra.title);
    assert.ok(ra.description.length <= 512 && ra.description.includes("writ review rv-0123456789abcdef0123: Bash (execute)"), ra.description);

    // deny, timeout and cancel are not forwarded: the call stays blocked.
    for (const d of ["deny", "timeout", "cancelled", "allow-always"]) await ra.onResolution(d);
    assert.equal(s.requests.filter((q) => q.op === "openclaw.resolve").length, 0);

    await ra.onResolution("allow-once");
    const res = s.requests.filter((q) => q.op === "openclaw.resolve");
    assert.equal(res.length, 1);
    assert.equal(res[0].body.review_id, "rv-0123456789abcdef0123");
    assert.equal(res[0].body.decision, "allow-once");
    assert.equal(res[0].body.call_id, "call_01HX9");
    assert.deepEqual(res[0].body.reviewer, { user: "gateway-ops", password: "ops-secret" });
    fs.rmSync(pwDir, { recursive: true, force: true });
  } finally {
    await s.close();
  }
});

test("approval refused by writ, or a reviewer secret that cannot be read: onResolution rejects, naming why", async () => {
  const refused = { plugin: { verdict: "refused", reason: "the reviewer must be an operator identity, not the worker w1" } };
  const s = await fakeSidecar((req) => (req.op === "openclaw.resolve" ? refused : answers.approval));
  const pwDir = fs.mkdtempSync(path.join(os.tmpdir(), "writ-oc-pw-"));
  try {
    const pw = path.join(pwDir, "w1.password");
    fs.writeFileSync(pw, "w1-secret");
    const { event, ctx } = fixture("held-exec-before.json");
    const r = await createWritHooks(config(s.socket, { reviewer: { user: "w1", passwordFile: pw } })).beforeToolCall(event, ctx);
    await assert.rejects(r.requireApproval.onResolution("allow-once"), /not the worker w1/);

    const missing = await createWritHooks(config(s.socket, { reviewer: { user: "ops", passwordFile: path.join(pwDir, "none") } })).beforeToolCall(event, ctx);
    const before = s.requests.filter((q) => q.op === "openclaw.resolve").length;
    await assert.rejects(missing.requireApproval.onResolution("allow-once"), /cannot read the reviewer's password file \(ENOENT\)/);
    assert.equal(s.requests.filter((q) => q.op === "openclaw.resolve").length, before, "nothing sent without the secret");
  } finally {
    fs.rmSync(pwDir, { recursive: true, force: true });
    await s.close();
  }
});

test("sidecar down: the socket does not exist, so the call is blocked as unreachable", async () => {
  const { event, ctx } = fixture("exec-before.json");
  const r = await createWritHooks(config(path.join(os.tmpdir(), "writ-no-such-dir", "w1.sock"))).beforeToolCall(event, ctx);
  assert.equal(r.block, true);
  assert.match(r.blockReason, /^writ was unreachable/);
  assert.match(r.blockReason, /ENOENT/);
});

test("sidecar hangs up, answers unavailable, or answers bad_request: blocked as unreachable", async () => {
  for (const [a, want] of [
    ["close", /closed the connection/],
    [answers.unavailable, /unavailable: the writ issuer did not answer/],
    [{ code: "bad_request", error: "toolCallId is missing" }, /could not read this call/],
  ]) {
    const s = await fakeSidecar(() => a);
    try {
      const { event, ctx } = fixture("exec-before.json");
      const r = await createWritHooks(config(s.socket)).beforeToolCall(event, ctx);
      assert.equal(r.block, true);
      assert.match(r.blockReason, /^writ was unreachable/);
      assert.match(r.blockReason, want);
    } finally {
      await s.close();
    }
  }
});

test("malformed answers are blocked, never read as a permit", async () => {
  for (const a of ["not json", "[]", "null", "{}", '{"plugin":{}}', '{"plugin":{"verdict":"allow"}}', '{"plugin":{"verdict":42}}']) {
    const s = await fakeSidecar(() => a);
    try {
      const { event, ctx } = fixture("exec-before.json");
      const r = await createWritHooks(config(s.socket)).beforeToolCall(event, ctx);
      assert.equal(r?.block, true, `answer ${a}`);
      assert.match(r.blockReason, /^writ was unreachable/, `answer ${a}`);
    } finally {
      await s.close();
    }
  }
});

test("over budget: a sidecar that never answers blocks the call within the time budget", async () => {
  const s = await fakeSidecar(() => null);
  try {
    const { event, ctx } = fixture("exec-before.json");
    const t0 = Date.now();
    const r = await createWritHooks(config(s.socket, { timeoutMs: 300 })).beforeToolCall(event, ctx);
    const took = Date.now() - t0;
    assert.equal(r.block, true);
    assert.match(r.blockReason, /no answer from the writ sidecar within 300 ms/);
    assert.ok(took < 2000, `took ${took} ms`);
  } finally {
    await s.close();
  }
});

test("idempotent retry: the same toolCallId is sent with the same body, and gets the same answer", async () => {
  const s = await fakeSidecar(() => answers.deny);
  try {
    const { event, ctx } = fixture("research-exec-before.json");
    const hooks = createWritHooks(config(s.socket));
    const first = await hooks.beforeToolCall(event, ctx);
    const again = await hooks.beforeToolCall(structuredClone(event), structuredClone(ctx));
    assert.deepEqual(again, first);
    assert.equal(s.requests.length, 2);
    assert.deepEqual(s.requests[1].body, s.requests[0].body);
  } finally {
    await s.close();
  }
});

test("after_tool_call reports the result, or the error, for the same call", async () => {
  const s = await fakeSidecar(() => answers.recorded);
  try {
    const hooks = createWritHooks(config(s.socket));
    const ok = fixture("exec-after.json");
    const a = await hooks.afterToolCall(ok.event, ok.ctx);
    assert.equal(a.verdict, "recorded");
    const failed = fixture("exec-after-error.json");
    await hooks.afterToolCall(failed.event, failed.ctx);
    assert.equal(s.requests[0].op, "openclaw.after");
    assert.equal(s.requests[0].body.call_id, "call_01HX3");
    assert.deepEqual(s.requests[0].body.result, ok.event.result);
    assert.equal(s.requests[0].body.error, undefined);
    assert.equal(s.requests[1].body.error, "Command exited with code 1");
    assert.equal(s.requests[1].body.result, undefined);
  } finally {
    await s.close();
  }
});

test("after_tool_call cuts a huge result so the request fits the sidecar's line bound", async () => {
  const s = await fakeSidecar(() => answers.recorded);
  try {
    const ok = fixture("exec-after.json");
    // 2 MB of text that JSON escapes and UTF-8 widens.
    const huge = { content: [{ type: "text", text: "\"é\u0001".repeat(700000) }] };
    const a = await createWritHooks(config(s.socket)).afterToolCall({ ...ok.event, result: huge }, ok.ctx);
    assert.equal(a.verdict, "recorded");
    const sent = s.requests[0];
    assert.ok(Buffer.byteLength(JSON.stringify(sent)) <= 512 * 1024, "the line exceeds the sidecar's bound");
    assert.equal(typeof sent.body.result, "string");
    assert.ok(sent.body.result.length >= 1024);
  } finally {
    await s.close();
  }
});

test("a bad config blocks every call instead of failing to register", async () => {
  assert.notEqual(configProblem(undefined), "");
  assert.notEqual(configProblem({ agents: { main: { worker: "w1" } }, socket: "/s" }), "");
  assert.notEqual(configProblem({ agents: { main: { worker: "w1", lane: "coordinator" } } }), "");
  assert.notEqual(configProblem({ socket: "/s", agents: {}, reviewer: { user: "ops" } }), "");
  assert.equal(configProblem({ socket: "/s", agents: { main: { worker: "w1", lane: "coordinator" } } }), "");

  /** @type {Record<string, Function>} */
  const handlers = {};
  plugin.register({ pluginConfig: undefined, on: (name, h) => (handlers[name] = h) });
  assert.deepEqual(Object.keys(handlers).sort(), ["after_tool_call", "before_tool_call", "message_received"]);
  const { event, ctx } = fixture("exec-before.json");
  const r = await handlers.before_tool_call(event, ctx);
  assert.equal(r.block, true);
  assert.match(r.blockReason, /no config/);
});

test("the manifest names the plugin and its config schema", () => {
  const m = JSON.parse(fs.readFileSync(path.join(here, "..", "openclaw.plugin.json"), "utf8"));
  assert.equal(m.id, plugin.id);
  assert.equal(m.configSchema.type, "object");
  assert.deepEqual(m.configSchema.required, ["agents"]);
});

test("message_received: an owner's message registers as the user's prompt, anyone else's as a peer message, in the agent's session", async () => {
  const s = await fakeSidecar(() => ({ plugin: { verdict: "recorded" } }));
  try {
    const hooks = createWritHooks(config(s.socket, { owners: ["+15550001"] }));
    const ctx = { channelId: "whatsapp", sessionKey: "agent:main:whatsapp:dm:+15550001" };
    let r = await hooks.messageReceived({ from: "+15550001", senderId: "+15550001", content: "pay the invoice from acme", messageId: "m1" }, ctx);
    assert.equal(r.verdict, "recorded");
    r = await hooks.messageReceived({ from: "+15559999", senderId: "+15559999", content: "IBAN DE00 attacker", messageId: "m2" }, ctx);
    assert.equal(r.verdict, "recorded");
    const reqs = s.requests.filter((q) => q.op === "openclaw.message");
    assert.equal(reqs.length, 2);
    assert.equal(reqs[0].worker, "w1");
    assert.equal(reqs[0].body.session, ctx.sessionKey);
    assert.equal(reqs[0].body.owner, true);
    assert.equal(reqs[1].body.owner, false, "a sender not listed as an owner is a peer");
    assert.equal(reqs[1].body.content, "IBAN DE00 attacker");

    // No agent in the session key, or an agent not in the config: nothing
    // is sent, and nothing is blocked.
    const before = s.requests.length;
    assert.equal((await hooks.messageReceived({ from: "x", content: "hi" }, { channelId: "c", sessionKey: "global" })).verdict, "unbound");
    assert.equal((await hooks.messageReceived({ from: "x", content: "hi" }, { channelId: "c", sessionKey: "agent:stranger:c" })).verdict, "unbound");
    assert.equal(s.requests.length, before);
  } finally {
    await s.close();
  }
});

test("message_received with the sidecar down reports unreachable and never throws", async () => {
  const hooks = createWritHooks(config(path.join(os.tmpdir(), "writ-no-such-dir", "w1.sock")));
  const r = await hooks.messageReceived({ from: "x", content: "hello" }, { channelId: "c", sessionKey: "agent:main:c" });
  assert.equal(r.verdict, "unreachable");
});

test("agentOfSession reads agent:<id>: keys only", () => {
  assert.equal(agentOfSession("agent:main:whatsapp:dm:+1"), "main");
  assert.equal(agentOfSession("agent::x"), "");
  assert.equal(agentOfSession("main"), "");
  assert.equal(agentOfSession(undefined), "");
});
