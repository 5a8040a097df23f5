// The demo's scenarios (otel_responses/tools/scenarios.py) written with openai-node: the same four calls, the same
// state handling, the same mistakes, so the Python SDK's run of a scenario is this one's twin. `stream`: every call
// streamed with `responses.stream()` and its final response kept.

export async function runOpenAI(OpenAI, command, fetch) {
  const client = new OpenAI({ baseURL: command.base_url, apiKey: "node-flows-key", maxRetries: 0, fetch });
  const t = { tool_result: "", answer: "", error: null, response_ids: [] };
  try {
    await new Session(client, command, t).run();
  } catch (error) {
    // As scenarios.run: the error is the flow's outcome (class name and the API's error code).
    t.error = typeof error?.code === "string" ? `${error.constructor.name}: ${error.code}` : error.constructor.name;
  }
  return t;
}

export function runTool(argumentsText) {
  const query = JSON.parse(argumentsText || "{}").query ?? "";
  return `order-status:shipped:${query.length}`;
}

class Session {
  constructor(client, command, t) {
    this.client = client;
    this.c = command.constants;
    this.scenario = command.scenario;
    this.mistake = command.scenario.mistake;
    this.stream = command.stream;
    this.marker = command.marker;
    this.t = t;
    this.previous = null;
    this.conversation = null;
    this.history = [];
  }

  async create(turn, newInput, extra = {}) {
    // A switch mid-conversation goes to another model from the tool turn's second call on.
    const model = this.mistake === "model_switched" && turn >= 3 ? this.c.switched_model : this.c.model;
    const body = { model, reasoning: this.c.reasoning, ...extra };
    if (turn === 1 || this.mistake !== "instructions_dropped") body.instructions = this.c.instructions;
    const mode = this.scenario.mode;
    if (mode === "server_chain") {
      if (this.previous !== null) body.previous_response_id = this.previous;
      if (turn === 1 && this.mistake === "unstored_parent") body.store = false;
      body.input = newInput;
    } else if (mode === "conversation") {
      body.conversation = this.conversation;
      if (turn === 2 && this.mistake === "state_mode_conflict") body.previous_response_id = this.previous;
      body.input = newInput;
    } else {
      this.history.push(...newInput);
      if (turn === 4 && this.mistake === "history_cut") this.history = this.history.slice(3);
      body.input = [...this.history];
      // That app leaves `store` at its default: stored.
      if (this.mistake !== "stored_reasoning_dropped") Object.assign(body, { store: false, include: [this.c.encrypted] });
      if (this.scenario.compacted) body.context_management = [{ type: "compaction", compact_threshold: 40 }];
    }
    const response = this.stream
      ? await this.client.responses.stream(body).finalResponse()
      : await this.client.responses.create(body);
    this.previous = response.id;
    this.t.response_ids.push(response.id);
    if (mode === "client_replay") {
      const kept = this.replayed(response.output);
      const at = kept.findIndex((item) => item.type === "compaction");
      this.history = at >= 0 ? kept.slice(at) : [...this.history, ...kept];
    }
    return response;
  }

  replayed(output) {
    if (this.mistake === "user_messages_only") return output.filter((item) => item.type === "function_call");
    if (this.mistake === "output_text_only") {
      const texts = output
        .filter((m) => m.type === "message")
        .flatMap((m) => m.content.filter((p) => p.type === "output_text").map((p) => p.text))
        .join("");
      const items = texts ? [{ role: "assistant", content: texts }] : [];
      return [...items, ...output.filter((m) => m.type === "function_call")];
    }
    const items = [];
    for (const item of output) {
      if (this.mistake === "phase_lost" && item.type === "message") {
        const { phase, ...rest } = withoutNulls(item);
        items.push(rest);
      } else if (this.mistake === "reasoning_altered" && item.type === "reasoning") {
        const dumped = withoutNulls(item);
        items.push({ ...dumped, encrypted_content: dumped.encrypted_content.slice(0, 64) });
      } else if (this.mistake === "tool_pair_broken" && item.type === "function_call") {
        continue;
      } else if (this.mistake === "stored_reasoning_dropped" && item.type === "reasoning") {
        continue;
      } else if (this.mistake === "foreign_call_ids" && item.type === "function_call") {
        items.push({ ...withoutNulls(item), id: `toolu_${item.call_id.replace(/^call_/, "")}` });
      } else {
        items.push(item);
      }
    }
    return items;
  }

  async run() {
    if (this.scenario.mode === "conversation") this.conversation = (await this.client.conversations.create()).id;
    await this.create(1, [{ role: "user", content: this.c.first.replace("{marker}", this.marker) }]);
    const second = await this.create(2, [{ role: "user", content: this.c.second }], { tools: this.c.tools });
    const call = second.output.find((item) => item.type === "function_call");
    if (call === undefined) throw new Error("the model did not call the tool");
    this.t.tool_result = runTool(call.arguments);
    const answer =
      this.mistake === "missing_tool_output"
        ? { role: "user", content: "Never mind the tool, go on." }
        : { type: "function_call_output", call_id: call.call_id, output: this.t.tool_result };
    const resent = [];
    if (this.mistake === "context_duplicated") {
      resent.push({ role: "user", content: this.c.second });
      for (const m of second.output.filter((item) => item.type === "message")) {
        resent.push({ role: "assistant", content: m.content[0].text });
      }
    } else if (this.mistake === "items_resent") {
      resent.push(...second.output); // the turn's output again, as returned, beside the conversation
    }
    await this.create(3, [...resent, answer], { tools: this.c.tools });
    const last = await this.create(4, [{ role: "user", content: this.c.third }]);
    this.t.answer = last.output
      .filter((m) => m.type === "message")
      .flatMap((m) => m.content.filter((p) => p.type === "output_text").map((p) => p.text))
      .join("");
  }
}

function withoutNulls(value) {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== null && v !== undefined));
}
