/**
 * `POST /v1/responses`, OpenAI's Responses API, on the engine path of the chat route: the request is
 * translated into the fleet's `CompletionRequest` (scheduler/chat/responses-schema.ts) and admitted as
 * generate.ts admits a chat completion (a place in flight from its arrival, the token quota's reserve,
 * the fleet's queue, the usage ledger as a `chat` row, the metrics); the fleet's events become a
 * `Response` or its typed server-sent events (scheduler/chat/responses.ts). The first event is awaited
 * before answering, so failures before any output get their own status; later ones end the stream
 * with the API's `error` event and `response.failed`.
 *
 * Nothing is stored (`store: true` and `previous_response_id` are refused), so `GET` and `DELETE
 * /v1/responses/{id}` answer 404 `response_not_found`.
 */
import { Hono, type Context } from "hono";
import { ApiError, NotFoundError, UpstreamError } from "../../../core/errors.js";
import type { Logger } from "../../../core/log.js";
import { ResponseWriter, responseId, type ResponseEvent, type ResponseIdentity } from "../../chat/responses.js";
import { validateResponses, type ResponsesBody, type ResponsesValidationOptions } from "../../chat/responses-schema.js";
import type { CompletionEvent } from "../../fleet/index.js";
import type { AppEnv } from "../env.js";
import { eventStream, withPlaces, type GenerationDeps } from "./generate.js";

/** Longest response id read from a path (ours are 53 characters): a longer one is not echoed back. */
const MAX_ID_ECHO = 128;

export function responsesRoutes(deps: GenerationDeps, validation: Omit<ResponsesValidationOptions, "models"> = {}): Hono<AppEnv> {
  const { fleet, usage, logger, metrics } = deps;
  const notStored = (c: Context<AppEnv>): never => {
    const id = c.req.param("id") ?? "";
    const named = id.length <= MAX_ID_ECHO && /^[\w-]+$/.test(id) ? JSON.stringify(id) : "the response asked for";
    throw new NotFoundError(
      "response_not_found",
      `response_id: ${named} is not stored: this service keeps no responses (store: true is refused); send the whole conversation in input`,
    );
  };
  return new Hono<AppEnv>()
    .post("/", (c) =>
      withPlaces(
        c,
        deps,
        (json) => validateResponses(json, { ...validation, ...(deps.models ? { models: deps.models } : {}) }),
        (body) => body,
        async (body, signal, keep) => {
          const { account, keyId } = c.get("identity");
          const owner = { account, keyId, model: body.model, kind: "chat" as const, requestId: c.get("requestId") };
          const onUsage = (used: { promptTokens: number; completionTokens: number }) => usage.record({ ...owner, ...used, audioSeconds: 0 });
          const events = metrics.measure(fleet.submit({ ...withoutEcho(body), account, onUsage }, signal, c.get("requestId")), body.model);
          const first = await events.next(); // throws the ApiError of a request that never started
          const a: ResponseIdentity = { id: responseId(), createdAt: Math.floor(Date.now() / 1000), model: body.requestedModel };
          const writer = new ResponseWriter(a, body.echo);
          if (!body.stream) return c.json(await collect(writer, events, first));
          return stream(c, writer, events, first, logger, keep()); // the stream gives the places back when it ends, fails or is cancelled
        },
      ),
    )
    .get("/:id", notStored)
    .delete("/:id", notStored);
}

/** The fleet's request without what only the answer needs. */
function withoutEcho(body: ResponsesBody) {
  const { echo: _echo, requestedModel: _requested, stream: _stream, includeUsage: _usage, ignored: _ignored, ...request } = body;
  return request;
}

async function collect(writer: ResponseWriter, events: AsyncIterator<CompletionEvent>, first: IteratorResult<CompletionEvent>) {
  for (let r = first; !r.done; r = await events.next()) {
    const e = r.value;
    if (e.type === "text" && e.index === 0) writer.generated(e.text, e.toolCalls);
    else if (e.type === "done") return writer.final(e);
  }
  throw new UpstreamError("agent_error", "the agent ended the completion without finishing it");
}

/** An event as the Responses API sends it: its type named on the `event:` line, its JSON on `data:`. */
const sse = (e: ResponseEvent): string => `event: ${e.type}\ndata: ${JSON.stringify(e)}\n\n`;

function stream(
  c: Context<AppEnv>,
  writer: ResponseWriter,
  events: AsyncIterator<CompletionEvent>,
  first: IteratorResult<CompletionEvent>,
  logger: Logger,
  release: () => void,
): Response {
  const eventText = (e: CompletionEvent): string => {
    if (e.type === "done") return writer.done(e).map(sse).join("");
    if (e.type !== "text" || e.index !== 0) return ""; // a completion has no other events, nor other choices
    return writer.generated(e.text, e.toolCalls).map(sse).join("");
  };
  return eventStream(c, {
    events,
    first,
    opening: writer.start().map(sse).join(""),
    eventText,
    failure: (err) =>
      writer
        .fail(err instanceof ApiError ? { code: err.code, message: err.message } : { code: "internal_error", message: "internal error" })
        .map(sse)
        .join(""),
    logger,
    release,
  });
}
