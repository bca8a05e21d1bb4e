// writ for OpenClaw: the hook handlers, kept free of OpenClaw imports so
// they run (and are tested) under plain node. Every judgement is the
// worker-agent sidecar's (docs/harnesses.md, "The plugin protocol"); this
// file translates OpenClaw hook events into sidecar requests and the
// sidecar's answers into hook results, and blocks the call whenever it
// cannot get a readable answer in time.

import { readFile } from "node:fs/promises";
import net from "node:net";

/** Default time budget of one sidecar request, in milliseconds. */
export const DEFAULT_TIMEOUT_MS = 5000;
/** Default time a person has to decide a held call (OpenClaw's own default). */
export const DEFAULT_APPROVAL_TIMEOUT_MS = 120000;
/** The sidecar's protocol version. */
export const PROTOCOL_VERSION = 1;
/** The plugin id, as in openclaw.plugin.json. */
export const PLUGIN_ID = "writ";

// The sidecar refuses a request line longer than 512 KiB plus a little
// (api.MaxBodyBytes); an after request whose result would not fit is sent
// with the result's text cut until it does (what is cut off is not
// registered as a source, so values taken from it count as model-made).
const MAX_LINE_BYTES = 500 * 1024;
const MAX_RESULT_CHARS = 256 * 1024;
const MAX_ANSWER_BYTES = 1 << 20;
const TITLE_MAX = 80;
const DESCRIPTION_MAX = 512;

/**
 * @typedef {{worker: string, lane: string, socket?: string}} AgentBinding
 * @typedef {{user: string, passwordFile: string}} Reviewer
 * @typedef {{
 *   socket?: string,
 *   timeoutMs?: number,
 *   approvalTimeoutMs?: number,
 *   agents?: Record<string, AgentBinding>,
 *   reviewer?: Reviewer,
 *   owners?: string[],
 * }} WritPluginConfig
 * @typedef {{toolName: string, params?: Record<string, unknown>, runId?: string,
 *   toolCallId?: string, result?: unknown, error?: string, durationMs?: number}} ToolEvent
 * @typedef {{agentId?: string, sessionKey?: string, sessionId?: string, runId?: string,
 *   toolName?: string, toolCallId?: string, workspaceDir?: string}} ToolContext
 * @typedef {{verdict: string, tool?: string, reason?: string, next?: string,
 *   review_id?: string, caption?: string, grant_id?: string, effect?: string,
 *   receipt?: number, notes?: string}} PluginAnswer
 * @typedef {{plugin?: PluginAnswer, code?: string, error?: string}} SidecarResponse
 * @typedef {(socket: string, request: object, timeoutMs: number) => Promise<unknown>} Transport
 */

/** An error that means: writ could not be asked, or its answer could not be read. */
export class WritUnreachable extends Error {}

/**
 * Sends one request line to the sidecar at socketPath and resolves with the
 * parsed answer line. Rejects with WritUnreachable when the socket is
 * missing, the sidecar closes or errs, the answer is not one JSON object,
 * or the budget runs out.
 * @type {Transport}
 */
export function sidecarRequest(socketPath, request, timeoutMs) {
  return new Promise((resolve, reject) => {
    let settled = false;
    let buf = "";
    const conn = net.createConnection({ path: socketPath });
    const finish = (err, value) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      conn.destroy();
      if (err) reject(err);
      else resolve(value);
    };
    const timer = setTimeout(
      () => finish(new WritUnreachable(`no answer from the writ sidecar within ${timeoutMs} ms`)),
      timeoutMs,
    );
    conn.setEncoding("utf8");
    conn.on("connect", () => conn.write(JSON.stringify(request) + "\n"));
    conn.on("data", (chunk) => {
      buf += chunk;
      if (buf.length > MAX_ANSWER_BYTES) {
        finish(new WritUnreachable("the writ sidecar's answer is too long"));
        return;
      }
      const nl = buf.indexOf("\n");
      if (nl < 0) return;
      let parsed;
      try {
        parsed = JSON.parse(buf.slice(0, nl));
      } catch (e) {
        finish(new WritUnreachable(`the writ sidecar's answer is not JSON: ${e.message}`));
        return;
      }
      finish(null, parsed);
    });
    conn.on("error", (e) => finish(new WritUnreachable(`cannot reach the writ sidecar at ${socketPath}: ${e.code || e.message}`)));
    conn.on("close", () => finish(new WritUnreachable("the writ sidecar closed the connection without an answer")));
  });
}

/**
 * Checks the plugin config; returns the problem, or "" when it is usable.
 * @param {unknown} config
 * @returns {string}
 */
export function configProblem(config) {
  if (!config || typeof config !== "object") return "the writ plugin has no config (plugins.entries.writ.config)";
  const c = /** @type {WritPluginConfig} */ (config);
  if (!c.agents || typeof c.agents !== "object") return "the writ plugin config lists no agents";
  for (const [id, a] of Object.entries(c.agents)) {
    if (!a || typeof a.worker !== "string" || !a.worker || typeof a.lane !== "string" || !a.lane) {
      return `agent "${id}" in the writ plugin config needs a worker and a lane`;
    }
    if (!(typeof a.socket === "string" && a.socket) && !(typeof c.socket === "string" && c.socket)) {
      return `agent "${id}" in the writ plugin config has no sidecar socket (set socket)`;
    }
  }
  if (c.timeoutMs !== undefined && !(Number.isInteger(c.timeoutMs) && c.timeoutMs >= 100 && c.timeoutMs <= 30000)) {
    return "timeoutMs in the writ plugin config must be an integer from 100 to 30000";
  }
  if (c.owners !== undefined && !(Array.isArray(c.owners) && c.owners.every((o) => typeof o === "string" && o))) {
    return "owners in the writ plugin config must be a list of sender ids";
  }
  if (c.reviewer !== undefined) {
    const r = c.reviewer;
    if (!r || typeof r.user !== "string" || !r.user || typeof r.passwordFile !== "string" || !r.passwordFile) {
      return "reviewer in the writ plugin config needs user and passwordFile";
    }
  }
  return "";
}

/**
 * @param {string} s
 * @param {number} n
 */
function cut(s, n) {
  return s.length <= n ? s : s.slice(0, n - 1) + "…";
}

/**
 * @param {string} reason
 */
function block(reason) {
  return { block: true, blockReason: reason };
}

/**
 * @param {string} why
 */
function unreachable(why) {
  return block(`writ was unreachable, so writ blocks this call: ${why}. Retry the call once writ answers; do not work around it.`);
}

/**
 * The result of a finished call as the sidecar takes it: its JSON, or, when
 * it cannot be encoded or is too long, its text cut to the bound.
 * @param {unknown} result
 */
function encodeResult(result) {
  if (result === undefined) return undefined;
  let s;
  try {
    s = JSON.stringify(result);
  } catch {
    return cut(String(result), MAX_RESULT_CHARS);
  }
  if (s === undefined) return undefined;
  return s.length > MAX_RESULT_CHARS ? cut(s, MAX_RESULT_CHARS) : result;
}

/**
 * Cuts body.result until the request line fits the sidecar's bound.
 * @param {Record<string, unknown>} body
 * @param {unknown} result
 */
function fitLine(body, result) {
  const size = () => Buffer.byteLength(JSON.stringify(body)) + 512;
  if (body.result === undefined || size() <= MAX_LINE_BYTES) return;
  let text;
  try {
    text = typeof result === "string" ? result : JSON.stringify(result);
  } catch {
    text = String(result);
  }
  for (let n = Math.min(text.length, MAX_RESULT_CHARS); n >= 1024; n = Math.floor(n / 2)) {
    body.result = cut(text, n);
    if (size() <= MAX_LINE_BYTES) return;
  }
  delete body.result;
}

/**
 * Builds the before_tool_call and after_tool_call handlers.
 * @param {WritPluginConfig} config
 * @param {{transport?: Transport, log?: {warn?: (msg: string) => void, info?: (msg: string) => void}}} [opts]
 */
export function createWritHooks(config, opts = {}) {
  const transport = opts.transport || sidecarRequest;
  const log = opts.log || {};
  const problem = configProblem(config);
  const budget = (config && config.timeoutMs) || DEFAULT_TIMEOUT_MS;

  /**
   * Resolves the agent's binding and the call's identity, or the reason to block.
   * @param {ToolEvent} event
   * @param {ToolContext} ctx
   */
  function bind(event, ctx) {
    if (problem) return { error: `writ blocks this call: ${problem}` };
    const agentId = ctx && ctx.agentId;
    const agents = config.agents || {};
    if (!agentId || !Object.prototype.hasOwnProperty.call(agents, agentId)) {
      return { error: `writ blocks this call: agent "${agentId || "(none)"}" has no writ worker and lane in the writ plugin config; an operator has to add it (there is no default lane)` };
    }
    const a = agents[agentId];
    const session = (ctx && (ctx.sessionKey || ctx.sessionId || ctx.runId)) || event.runId;
    const callId = event.toolCallId || (ctx && ctx.toolCallId);
    if (!session || !callId) {
      return { error: `writ blocks this call: the gateway gave it no ${session ? "toolCallId" : "session"}, so writ cannot bind one answer to it` };
    }
    /** @type {Record<string, unknown>} */
    const body = { lane: a.lane, session, tool: event.toolName, call_id: callId, params: event.params || {} };
    if (ctx && typeof ctx.workspaceDir === "string" && ctx.workspaceDir) body.cwd = ctx.workspaceDir;
    return { worker: a.worker, socket: a.socket || config.socket, body };
  }

  /**
   * Asks the sidecar; resolves with its plugin answer, or rejects with WritUnreachable.
   * @param {string} socket
   * @param {string} worker
   * @param {string} op
   * @param {object} body
   * @returns {Promise<PluginAnswer>}
   */
  async function ask(socket, worker, op, body) {
    const request = { v: PROTOCOL_VERSION, op, worker, timeout_ms: Math.max(1, budget - 100), body };
    const resp = /** @type {SidecarResponse} */ (await transport(socket, request, budget));
    if (!resp || typeof resp !== "object" || Array.isArray(resp)) throw new WritUnreachable("the writ sidecar's answer is not a JSON object");
    if (resp.code) {
      const detail = typeof resp.error === "string" ? resp.error : "";
      if (resp.code === "bad_request") throw new WritUnreachable(`the writ sidecar could not read this call (${cut(detail, 300)})`);
      throw new WritUnreachable(`${resp.code}${detail ? ": " + cut(detail, 300) : ""}`);
    }
    const p = resp.plugin;
    if (!p || typeof p !== "object" || typeof p.verdict !== "string") throw new WritUnreachable("the writ sidecar's answer has no verdict");
    return p;
  }

  /**
   * @param {ToolEvent} event
   * @param {ToolContext} ctx
   */
  async function beforeToolCall(event, ctx) {
    const b = bind(event, ctx);
    if (b.error) return block(b.error);
    const { socket, worker, body } = /** @type {{socket: string, worker: string, body: Record<string, unknown>}} */ (b);
    let a;
    try {
      a = await ask(socket, worker, "openclaw.before", body);
    } catch (e) {
      return unreachable(e instanceof Error ? e.message : String(e));
    }
    switch (a.verdict) {
      case "permit":
        return undefined;
      case "deny":
        return block(`${a.reason || "writ denied this call."}${a.next ? " Next step: " + a.next + "." : ""}`);
      case "approval_required":
        return approval(a, socket, worker, body);
      default:
        return unreachable(`the writ sidecar answered an unknown verdict "${cut(String(a.verdict), 40)}"`);
    }
  }

  /**
   * @param {PluginAnswer} a
   * @param {string} socket
   * @param {string} worker
   * @param {Record<string, unknown>} body
   */
  function approval(a, socket, worker, body) {
    const caption = a.caption || `writ review ${a.review_id || "(no id)"}`;
    if (!config.reviewer) {
      return block(`${caption}. ${a.reason || "writ requires a person's approval for this call."} No writ reviewer is configured for this gateway, so it cannot be approved here.`);
    }
    if (!a.review_id) {
      return block(`${caption}. writ named no review, so this call cannot be approved here.`);
    }
    const reviewer = config.reviewer;
    return {
      requireApproval: {
        title: cut(`writ review ${a.review_id}: ${a.tool || body.tool}`, TITLE_MAX),
        description: cut(`${caption}. Allow once releases this one call, once, as writ reviewer ${reviewer.user}; deny keeps it blocked.`, DESCRIPTION_MAX),
        severity: "warning",
        timeoutMs: config.approvalTimeoutMs || DEFAULT_APPROVAL_TIMEOUT_MS,
        // Said outright rather than left to the host's default: a request
        // nobody answers, or nobody can be asked about, is a denial.
        timeoutBehavior: "deny",
        keepPendingWithoutRoute: false,
        allowedDecisions: ["allow-once", "deny"],
        pluginId: PLUGIN_ID,
        /** @param {string} decision */
        onResolution: async (decision) => {
          if (decision !== "allow-once") return;
          // The gateway reads its reviewer's secret and hands it over: the
          // sidecar never reads a reviewer's password file for a caller.
          let password;
          try {
            password = (await readFile(reviewer.passwordFile, "utf8")).trim();
          } catch (e) {
            throw new Error(`writ did not release review ${a.review_id}: cannot read the reviewer's password file (${e.code || e.message})`);
          }
          const r = await ask(socket, worker, "openclaw.resolve", {
            ...body,
            review_id: a.review_id,
            decision,
            reviewer: { user: reviewer.user, password },
          });
          if (r.verdict !== "permit") {
            throw new Error(`writ did not release review ${a.review_id}: ${r.reason || r.verdict}`);
          }
        },
      },
    };
  }

  /**
   * Reports a finished call. Resolves with the sidecar's answer, or with
   * {verdict: "unreachable", reason} when it could not be asked.
   * @param {ToolEvent} event
   * @param {ToolContext} ctx
   * @returns {Promise<PluginAnswer>}
   */
  async function afterToolCall(event, ctx) {
    const b = bind(event, ctx);
    if (b.error) return { verdict: "unbound", reason: b.error };
    const { socket, worker, body } = /** @type {{socket: string, worker: string, body: Record<string, unknown>}} */ (b);
    if (typeof event.error === "string" && event.error) body.error = cut(event.error, 4096);
    else {
      const r = encodeResult(event.result);
      if (r !== undefined) body.result = r;
    }
    fitLine(body, event.result);
    try {
      const a = await ask(socket, worker, "openclaw.after", body);
      if (a.verdict !== "recorded" && log.warn) log.warn(`writ: the ${event.toolName} call's effect was not recorded: ${a.reason || a.verdict}`);
      return a;
    } catch (e) {
      const reason = e instanceof Error ? e.message : String(e);
      if (log.warn) log.warn(`writ: the ${event.toolName} call's effect was not recorded: ${reason}`);
      return { verdict: "unreachable", reason };
    }
  }

  /**
   * Registers a message the gateway received as a provenance source of the
   * agent's session, so a value an agent copies from it into a tool call is
   * traced to it: a configured owner's message is the user's prompt, any
   * other sender's is a peer message (evidence, which may not name a
   * protected target on its own). The agent is read from the session key
   * (agent:<agentId>:...); a message whose agent cannot be told, or is not
   * in the config, is not registered (its values then count as the model's
   * own, which is no better grounded). Never blocks or changes the message.
   * @param {{from?: string, content?: string, senderId?: string, messageId?: string, sessionKey?: string}} event
   * @param {{channelId?: string, sessionKey?: string, senderId?: string, messageId?: string}} ctx
   * @returns {Promise<PluginAnswer>}
   */
  async function messageReceived(event, ctx) {
    if (problem) return { verdict: "unbound", reason: problem };
    const session = (ctx && ctx.sessionKey) || (event && event.sessionKey);
    const agentId = agentOfSession(session);
    const agents = config.agents || {};
    if (!agentId || !Object.prototype.hasOwnProperty.call(agents, agentId)) {
      return { verdict: "unbound", reason: `no configured agent for session ${session || "(none)"}` };
    }
    const content = event && typeof event.content === "string" ? event.content : "";
    if (!content) return { verdict: "unbound", reason: "an empty message" };
    const a = agents[agentId];
    const sender = (event && (event.senderId || event.from)) || (ctx && ctx.senderId) || "";
    const owners = config.owners || [];
    const body = {
      session,
      message_id: String((event && event.messageId) || (ctx && ctx.messageId) || ""),
      sender: cut(String(sender), 256),
      owner: sender !== "" && owners.includes(String(sender)),
      content: cut(content, MAX_RESULT_CHARS),
    };
    try {
      const r = await ask(a.socket || config.socket, a.worker, "openclaw.message", body);
      if (r.verdict !== "recorded" && log.warn) log.warn(`writ: a message was not registered as a source: ${r.reason || r.verdict}`);
      return r;
    } catch (e) {
      const reason = e instanceof Error ? e.message : String(e);
      if (log.warn) log.warn(`writ: a message was not registered as a source: ${reason}`);
      return { verdict: "unreachable", reason };
    }
  }

  return { beforeToolCall, afterToolCall, messageReceived };
}

/**
 * The agent id of an OpenClaw session key (agent:<agentId>:...), or "".
 * @param {unknown} key
 */
export function agentOfSession(key) {
  if (typeof key !== "string") return "";
  const m = /^agent:([^:]+):/.exec(key);
  return m ? m[1] : "";
}
