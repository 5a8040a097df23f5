// The flows' worker: one JSON command a line on standard input, one JSON result a line on standard output, so that a
// test starts Node once per client set. A command names the client (`openai`, `ai-sdk`), the flow, the base URL and
// the scenario's constants; the result carries the flow's transcript and every exchange as the client saw it.
// CLIENT_SET picks the packages: `newest` (openai 7, ai 7, @ai-sdk/openai 4) or `floor` (the aliases openai-6, ai-6,
// @ai-sdk/openai-3).

import { createInterface } from "node:readline";
import { recordingFetch, settled } from "./record.mjs";
import { runOpenAI } from "./openai-flows.mjs";
import { runAISDK } from "./ai-sdk-flows.mjs";

const PACKAGES = {
  newest: { openai: "openai", ai: "ai", provider: "@ai-sdk/openai" },
  floor: { openai: "openai-6", ai: "ai-6", provider: "@ai-sdk/openai-3" },
};
const names = PACKAGES[process.env.CLIENT_SET ?? "newest"];
if (names === undefined) throw new Error(`CLIENT_SET must be one of ${Object.keys(PACKAGES)}`);
const [openai, ai, provider] = await Promise.all([import(names.openai), import(names.ai), import(names.provider)]);
const versions = {
  node: process.versions.node,
  openai: await versionOf(names.openai),
  ai: await versionOf(names.ai),
  provider: await versionOf(names.provider),
};

async function versionOf(name) {
  const { createRequire } = await import("node:module");
  const require = createRequire(import.meta.url);
  const { readFileSync } = await import("node:fs");
  const { dirname, join } = await import("node:path");
  let dir = dirname(require.resolve(name));
  for (;;) {
    try {
      const manifest = JSON.parse(readFileSync(join(dir, "package.json"), "utf8"));
      if (manifest.version && manifest.name) return manifest.version;
    } catch {}
    const up = dirname(dir);
    if (up === dir) return null;
    dir = up;
  }
}

process.stdout.write(JSON.stringify({ ready: true, versions }) + "\n");
for await (const line of createInterface({ input: process.stdin })) {
  if (!line.trim()) continue;
  const command = { ...JSON.parse(line), ai_major: Number(versions.ai.split(".")[0]) };
  const exchanges = [];
  const fetch = recordingFetch(exchanges, { release: command.release });
  let transcript;
  try {
    transcript =
      command.client === "openai"
        ? await runOpenAI(openai.default, command, fetch)
        : await runAISDK(ai, provider, command, fetch);
  } catch (error) {
    transcript = { crashed: String(error?.stack ?? error) };
  }
  process.stdout.write(JSON.stringify({ transcript, exchanges: await settled(exchanges) }) + "\n");
}
