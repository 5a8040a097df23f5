// A fetch that records what the client sent and what it received, byte for byte, with each chunk's arrival time,
// and hands the client the response unchanged (the body teed: the client reads one branch, the recorder the other).
// With `release` (a URL), the first complete server-sent event of each stream is acknowledged there at once: the
// test's upstream holds the rest of the stream until then, so a proxy holding the first event back shows.

export function recordingFetch(exchanges, { release } = {}) {
  return async (input, init = {}) => {
    const started = performance.now();
    const url = new URL(typeof input === "string" || input instanceof URL ? input : input.url);
    const body = typeof init.body === "string" ? init.body : init.body == null ? null : String(init.body);
    const response = await fetch(input, init);
    const exchange = {
      method: init.method ?? "GET",
      path: url.pathname + url.search,
      request_body: body,
      status: response.status,
      headers: [...response.headers],
      headers_ms: performance.now() - started,
      chunks: [],
    };
    exchanges.push(exchange);
    if (response.body == null) {
      exchange.done = Promise.resolve();
      return response;
    }
    const [mine, theirs] = response.body.tee();
    const streamed = (response.headers.get("content-type") ?? "").startsWith("text/event-stream");
    exchange.done = read(mine, exchange, started, streamed ? release : undefined);
    return new Response(theirs, { status: response.status, statusText: response.statusText, headers: response.headers });
  };
}

async function read(stream, exchange, started, release) {
  const decoder = new TextDecoder();
  let text = "";
  let acknowledged = release == null;
  for await (const chunk of stream) {
    exchange.chunks.push({ ms: performance.now() - started, base64: Buffer.from(chunk).toString("base64") });
    if (!acknowledged) {
      text += decoder.decode(chunk, { stream: true });
      if (text.includes("\n\n")) {
        acknowledged = true;
        exchange.first_event_ms = performance.now() - started;
        await (await fetch(release, { method: "POST" })).arrayBuffer();
      }
    }
  }
}

// What the test reads: every exchange once its body was read to the end.
export async function settled(exchanges) {
  await Promise.all(exchanges.map((exchange) => exchange.done));
  return exchanges.map(({ done, ...exchange }) => exchange);
}
