// The OpenClaw entry point of the writ plugin: registers the hooks of
// writ.js. No build step and no dependencies; OpenClaw loads this file
// from the directory named in plugins.load.paths.

import { createWritHooks, PLUGIN_ID } from "./writ.js";

/**
 * @typedef {{
 *   pluginConfig?: unknown,
 *   logger?: {warn?: (msg: string) => void, info?: (msg: string) => void},
 *   on: (name: string, handler: (event: any, ctx: any) => unknown) => void,
 * }} PluginApi
 */

export default {
  id: PLUGIN_ID,
  name: "writ",
  description: "A writ grant before every tool call, through the worker-agent sidecar; fails closed.",
  /** @param {PluginApi} api */
  register(api) {
    // A bad config does not throw here: a plugin that fails to register
    // would let every call run. The hooks block each call instead, naming
    // the problem.
    const hooks = createWritHooks(/** @type {any} */ (api.pluginConfig), { log: api.logger });
    api.on("before_tool_call", (event, ctx) => hooks.beforeToolCall(event, ctx));
    api.on("after_tool_call", async (event, ctx) => {
      await hooks.afterToolCall(event, ctx);
    });
    api.on("message_received", async (event, ctx) => {
      await hooks.messageReceived(event, ctx);
    });
  },
};
