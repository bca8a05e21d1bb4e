// A minimal stand-in for OpenClaw's plugin host, for the end-to-end test
// of the writ plugin: it loads the plugin, collects the handlers it
// registers with api.on, and runs each step's tool call the way
// OpenClaw's hook runner does — before_tool_call; a block stops the call;
// requireApproval waits for the step's decision and calls onResolution
// with it (a decision other than allow-once, or an onResolution that
// throws, blocks the call); then the "tool" runs (its result is the
// step's) and after_tool_call gets the result.
//
// usage: node openclaw-standin.mjs PLUGIN_DIR STEPS.json
// Prints one JSON array: per step {blocked, blockReason?, approval?, ran, after?}.

import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

const [pluginDir, stepsFile] = process.argv.slice(2);
const plugin = (await import(pathToFileURL(path.join(pluginDir, "index.js")).href)).default;
const steps = JSON.parse(fs.readFileSync(stepsFile, "utf8"));

const out = [];
for (const s of steps) {
  /** @type {Record<string, Function>} */
  const handlers = {};
  const warnings = [];
  plugin.register({
    id: plugin.id,
    pluginConfig: s.config,
    logger: { warn: (m) => warnings.push(m), info: () => {} },
    on: (name, h) => (handlers[name] = h),
  });
  const event = { toolName: s.tool, params: s.params, runId: "run-1", toolCallId: s.callId };
  const ctx = { agentId: s.agentId, sessionKey: s.session, sessionId: "sid-1", runId: "run-1", toolName: s.tool, toolCallId: s.callId };
  const r = { blocked: false, ran: false, warnings };
  const before = await handlers.before_tool_call(structuredClone(event), structuredClone(ctx));
  if (before && before.block) {
    r.blocked = true;
    r.blockReason = before.blockReason;
  } else if (before && before.requireApproval) {
    const ra = before.requireApproval;
    r.approval = { title: ra.title, description: ra.description, allowedDecisions: ra.allowedDecisions };
    const decision = s.decision || "timeout";
    try {
      if (ra.onResolution) await ra.onResolution(decision);
      if (decision !== "allow-once" && decision !== "allow-always") {
        r.blocked = true;
        r.blockReason = `approval ${decision}`;
      } else if (!ra.allowedDecisions.includes(decision)) {
        r.blocked = true;
        r.blockReason = `decision ${decision} was not offered`;
      }
    } catch (e) {
      r.blocked = true;
      r.blockReason = `onResolution failed: ${e.message}`;
    }
  }
  if (!r.blocked) {
    r.ran = true;
    await handlers.after_tool_call({ ...structuredClone(event), result: s.result, durationMs: 5 }, structuredClone(ctx));
  }
  out.push(r);
}
process.stdout.write(JSON.stringify(out));
