// The demo's scenarios written with the Vercel AI SDK (`generateText`/`streamText` with the OpenAI provider's
// Responses model): the app keeps `ModelMessage`s and hands the provider its state through `providerOptions.openai`
// (`store`, `include`, `previousResponseId`, `conversation`, `contextManagement`). The same four model calls as the
// Python scenario: a first turn, a tool turn (the tool call, then its result), a last question.
//
// How each mode carries context, as the AI SDK's own documentation has it:
// - client_replay: every turn's `response.messages` appended to `messages`; the tool runs in the SDK's tool loop
//   (`execute` with `stopWhen: stepCountIs(2)`); with `store: false` the reasoning travels back as
//   `reasoningEncryptedContent` (`include: ["reasoning.encrypted_content"]`).
// - server_chain / conversation: each call sends only what is new beside `previousResponseId` (the last
//   response's `providerMetadata.openai.responseId`) or `conversation`; the app runs the tool itself (a tool
//   without `execute`) and sends its result as a `tool` message.
// Mistakes are the demo's, made the way an AI SDK app makes them (see MISTAKES below).

import { runTool } from "./openai-flows.mjs";

export async function runAISDK(ai, provider, command, fetch) {
  const openai = provider.createOpenAI({ baseURL: command.base_url, apiKey: "node-flows-key", fetch });
  const t = { tool_result: "", answer: "", error: null, response_ids: [] };
  try {
    await new Session(ai, openai, { ...command, fetch }, t).run();
  } catch (error) {
    const cause = error?.lastError ?? error;
    const code = cause?.data?.error?.code;
    t.error = typeof code === "string" ? `${cause.constructor.name}: ${code}` : cause.constructor.name;
    t.status = cause?.statusCode ?? null;
  }
  return t;
}

class Session {
  constructor(ai, openai, command, t) {
    this.ai = ai;
    this.model = openai.responses(command.constants.model);
    // A switch mid-conversation: the last question goes to another model (the tool turn is one call here).
    this.switchedModel = openai.responses(command.constants.switched_model);
    this.c = command.constants;
    this.scenario = command.scenario;
    this.mode = command.scenario.mode;
    this.mistake = command.scenario.mistake;
    this.stream = command.stream;
    this.marker = command.marker;
    this.t = t;
    this.messages = []; // client_replay: the whole history; the other modes: what this call adds
    this.previous = null;
    this.conversation = command.conversation ?? null;
    // ai 7 calls the system prompt `instructions` (`system` stays, deprecated); ai 6 has `system` only.
    this.instructionsKey = command.ai_major >= 7 ? "instructions" : "system";
    this.fetch = command.fetch;
    this.baseURL = command.base_url;
  }

  tools(execute) {
    const { name, description, parameters } = this.c.tools[0];
    const definition = { description, inputSchema: this.ai.jsonSchema(parameters) };
    if (execute) definition.execute = async ({ query }) => runTool(JSON.stringify({ query }));
    return { [name]: this.ai.tool(definition) };
  }

  options(turn) {
    // As the Python scenario asks (earlier turns' reasoning in view). The floor's provider knows no reasoningContext
    // and leaves it out: its model keeps its default (current_turn).
    const openai = { reasoningContext: this.c.reasoning.context };
    if (this.mode === "server_chain") {
      if (this.previous !== null) openai.previousResponseId = this.previous;
      if (turn === 1 && this.mistake === "unstored_parent") openai.store = false;
    } else if (this.mode === "conversation") {
      openai.conversation = this.conversation;
      if (turn === 2 && this.mistake === "state_mode_conflict") openai.previousResponseId = this.previous;
    } else if (this.mistake !== "stored_reasoning_dropped") {
      // (That app leaves `store` at its default: the provider then replays items by reference.)
      Object.assign(openai, { store: false, include: [this.c.encrypted] });
      if (this.scenario.compacted) openai.contextManagement = [{ type: "compaction", compactThreshold: 40 }];
    }
    return { openai };
  }

  // One generateText/streamText: `turn` counts model calls as the scenario does (the tool loop makes two).
  async call(turn, added, { tools, steps = 1 } = {}) {
    const history = this.mode === "client_replay" ? this.messages : [];
    if (this.mode === "client_replay") this.messages.push(...added);
    if (this.mode === "client_replay" && turn === 4 && this.mistake === "history_cut") {
      this.messages = this.messages.slice(2); // the oldest turn: its user message and the answer to it
    }
    const settings = {
      model: turn === 4 && this.mistake === "model_switched" ? this.switchedModel : this.model,
      messages: this.mode === "client_replay" ? [...this.messages] : [...(this.resent ?? []), ...added],
      providerOptions: this.options(turn),
      maxRetries: 0,
    };
    this.resent = undefined;
    if (turn === 1 || this.mistake !== "instructions_dropped") settings[this.instructionsKey] = this.c.instructions;
    if (tools) Object.assign(settings, { tools, stopWhen: this.ai.stepCountIs(steps) });
    let result;
    if (this.stream) {
      let failure = null;
      result = this.ai.streamText({ ...settings, onError: ({ error }) => (failure = error) });
      await result.consumeStream();
      if (failure !== null) throw failure;
      result = {
        responseMessages: await result.responseMessages,
        response: await result.response,
        steps: await result.steps,
        text: await result.text,
      };
    } else {
      result = await this.ai.generateText(settings);
    }
    for (const step of result.steps) {
      this.t.response_ids.push(step.providerMetadata?.openai?.responseId ?? step.response.id);
    }
    // ai 7: `responseMessages` gathers every step's (`response.messages` is the last step's); ai 6: `response.messages`.
    const responseMessages = result.responseMessages ?? result.response.messages;
    const last = result.steps.at(-1);
    this.previous = last.providerMetadata?.openai?.responseId ?? last.response.id;
    if (this.mode === "client_replay") {
      const kept = this.replayed(responseMessages);
      this.messages.push(...kept);
      if (this.scenario.compacted) this.keepFromCompaction();
    } else if (this.mistake === "context_duplicated" && turn === 2) {
      this.resent = [...added, ...responseMessages]; // as a whole-history app would: turn 2 again
    } else if (this.mistake === "items_resent" && turn === 2) {
      this.resent = responseMessages; // the turn's output again, as returned
    }
    return { steps: result.steps, text: result.text, responseMessages };
  }

  // What the app appends to `messages`: the response's messages as returned, unless it makes a mistake.
  replayed(messages) {
    if (this.mistake === "user_messages_only") return [];
    const out = [];
    for (const message of messages) {
      if (message.role !== "assistant" || typeof message.content === "string") {
        out.push(message);
        continue;
      }
      let parts = message.content;
      if (this.mistake === "output_text_only") {
        const text = parts.filter((p) => p.type === "text").map((p) => p.text).join("");
        const calls = parts.filter((p) => p.type === "tool-call");
        parts = [...(text ? [{ type: "text", text }] : []), ...calls];
      } else if (this.mistake === "phase_lost") {
        parts = parts.map((p) => (p.type === "text" ? { type: "text", text: p.text } : p));
      } else if (this.mistake === "reasoning_altered") {
        parts = parts.map((p) => (p.type === "reasoning" ? cutReasoning(p) : p));
      } else if (this.mistake === "tool_pair_broken") {
        parts = parts.filter((p) => p.type !== "tool-call");
      } else if (this.mistake === "stored_reasoning_dropped") {
        parts = parts.filter((p) => p.type !== "reasoning");
      } else if (this.mistake === "foreign_call_ids") {
        parts = parts.map((p) => (p.type === "tool-call" ? foreignId(p) : p));
      }
      if (parts.length) out.push({ ...message, content: parts });
    }
    return out;
  }

  keepFromCompaction() {
    const at = this.messages.findLastIndex(
      (m) => Array.isArray(m.content) && m.content.some((p) => p.type === "compaction" || p.providerOptions?.openai?.type === "compaction"),
    );
    if (at > 0) this.messages = this.messages.slice(at);
  }

  async run() {
    if (this.mode === "conversation") {
      // The AI SDK has no conversations API: the app creates one over HTTP.
      const response = await this.fetch(`${this.baseURL}/conversations`, {
        method: "POST",
        headers: { authorization: "Bearer node-flows-key", "content-type": "application/json" },
        body: "{}",
      });
      this.conversation = (await response.json()).id;
    }
    const first = this.c.first.replace("{marker}", this.marker);
    await this.call(1, [{ role: "user", content: first }]);
    const user2 = { role: "user", content: this.c.second };
    if (this.mode === "client_replay") {
      const result = await this.call(2, [user2], { tools: this.tools(true), steps: 2 });
      this.t.tool_result = toolResult(result.responseMessages);
      if (!this.t.tool_result) throw new Error("the model did not call the tool");
    } else {
      const second = await this.call(2, [user2], { tools: this.tools(false) });
      const call = second.steps.at(-1).toolCalls[0];
      if (call === undefined) throw new Error("the model did not call the tool");
      this.t.tool_result = runTool(JSON.stringify(call.input));
      const answer =
        this.mistake === "missing_tool_output"
          ? { role: "user", content: "Never mind the tool, go on." }
          : {
              role: "tool",
              content: [
                {
                  type: "tool-result",
                  toolCallId: call.toolCallId,
                  toolName: call.toolName,
                  output: { type: "text", value: this.t.tool_result },
                },
              ],
            };
      await this.call(3, [answer], { tools: this.tools(false) });
    }
    const last = await this.call(4, [{ role: "user", content: this.c.third }]);
    this.t.answer = last.text;
  }
}

// A tool call kept under the id another provider gave it (Anthropic's `toolu_…`), as a gateway that mints ids does.
function foreignId(part) {
  const openai = part.providerOptions?.openai ?? {};
  const itemId = `toolu_${part.toolCallId.replace(/^call_/, "")}`;
  return { ...part, providerOptions: { ...part.providerOptions, openai: { ...openai, itemId } } };
}

function cutReasoning(part) {
  const openai = part.providerOptions?.openai ?? {};
  const sealed = openai.reasoningEncryptedContent;
  if (typeof sealed !== "string") return part;
  return { ...part, providerOptions: { ...part.providerOptions, openai: { ...openai, reasoningEncryptedContent: sealed.slice(0, 64) } } };
}

function toolResult(messages) {
  for (const message of messages) {
    if (message.role !== "tool") continue;
    for (const part of message.content) {
      if (part.type === "tool-result") return typeof part.output?.value === "string" ? part.output.value : "";
    }
  }
  return "";
}
