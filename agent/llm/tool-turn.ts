/**
 * One assistant turn that may call functions, on node-llama-cpp's `LlamaChat.generateResponse`: the
 * tools documented in the prompt by the model's chat wrapper (in the syntax its template uses), a call
 * detected when the model starts one, its function's name and arguments then sampled under grammars
 * (a known name; JSON valid for the function's parameter schema), the arguments streamed as they come.
 *
 * `tool_choice` "required" and a named function make the turn open with a call: the wrapper's rendered
 * state gains a `noPrefixTrigger` of type "functionCall", which makes LlamaChat enter its
 * function-name grammar right after the prompt (the way node-llama-cpp's own templates force a call).
 *
 * Plain turns stay on turn.ts (faster per token, log probabilities, `n`, structured output); this one
 * is used only when tools are offered.
 */
import {
  LlamaChat,
  LlamaText,
  type ChatHistoryItem,
  type ChatModelFunctions,
  type ChatWrapper,
  type ChatWrapperGenerateContextStateOptions,
  type LlamaContextSequence,
  type Token,
} from "node-llama-cpp";
import type { Sampling, ToolCallDelta, ToolChoice, ToolFunction } from "../../core/chat.js";
import { toGrammarSchema } from "../../core/json-schema.js";
import { InvalidToolsError } from "./errors.js";
import { PENALTY_LAST_N, tokenBiasOf, type TurnResult } from "./turn.js";

export interface ToolTurnOptions {
  tools: readonly ToolFunction[];
  /** "auto", "required" or a named function ("none" never comes here: the turn is a plain one). */
  toolChoice: Exclude<ToolChoice, "none">;
  /** Whether the reply may hold several calls. */
  parallelToolCalls: boolean;
  maxTokens: number;
  temperature: number;
  sampling?: Sampling;
  signal?: AbortSignal;
  /** Each piece of the reply's text as it becomes final (text comes before any call). */
  onText?: (text: string) => void;
  /** Each piece of a call: its first names the function; the pieces' `arguments` joined are its JSON text. */
  onToolCall?: (delta: ToolCallDelta) => void;
}

export interface ToolTurnResult extends Omit<TurnResult, "stopReason"> {
  /** As TurnResult's, and "tool_calls": the model called functions and stopped to let them run. */
  stopReason: TurnResult["stopReason"] | "tool_calls";
  /** The calls the reply holds, in order: their functions and arguments' JSON text (as streamed). */
  toolCalls: { name: string; arguments: string }[];
}

/**
 * The functions shown to the model, by name, in a prototype-free object: a tenant's tool may be named
 * `__proto__` or `constructor`. A named choice shows only that function.
 */
export function functionsFor(tools: readonly ToolFunction[], choice: ToolChoice): ChatModelFunctions {
  const functions = Object.create(null) as Record<string, ChatModelFunctions[string]>;
  for (const tool of tools) {
    if (typeof choice === "object" && tool.name !== choice.name) continue;
    functions[tool.name] = {
      ...(tool.description ? { description: tool.description } : {}),
      ...(tool.parameters ? { params: toGrammarSchema(tool.parameters, { descriptions: true }) as NonNullable<ChatModelFunctions[string]["params"]> } : {}),
    };
  }
  return functions;
}

/**
 * `wrapper`, rendering states that make the model's turn open with a function call: what the template
 * puts before a call of its own (Harmony's `<|channel|>commentary`) is injected, then LlamaChat writes
 * the call's prefix and samples the name. A template whose turns open in a call the model may leave
 * (Functionary's) cannot force one: refused rather than left to the model.
 */
function forcingCall(wrapper: ChatWrapper): ChatWrapper {
  return new Proxy(wrapper, {
    get(target, key) {
      if (key === "generateContextState") {
        return (options: ChatWrapperGenerateContextStateOptions) => {
          const state = target.generateContextState(options);
          if (state.functionCall)
            throw new InvalidToolsError(
              `tool_choice: this model's chat template (${target.wrapperName}) lets the model answer without a call, so a call cannot be forced; use "auto"`,
            );
          const own = state.prefixTriggers?.find((t) => t.type === "functionCall");
          return { ...state, prefixTriggers: undefined, noPrefixTrigger: { type: "functionCall", inject: own?.inject ?? LlamaText([]) } };
        };
      }
      const value: unknown = Reflect.get(target, key, target);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}

/**
 * Generates the model's turn on `sequence` for `history` (ending with the model's turn) with `tools`
 * offered. The caller owns the sequence for the duration. `promptTokens` is the prompt as rendered
 * with the tools (renderPrompt), for the cached-token count.
 */
export async function generateToolTurn(
  sequence: LlamaContextSequence,
  wrapper: ChatWrapper,
  history: ChatHistoryItem[],
  functions: ChatModelFunctions,
  promptTokens: readonly Token[],
  options: ToolTurnOptions,
): Promise<ToolTurnResult> {
  const model = sequence.model;
  const held = sequence.contextTokens;
  let cachedTokens = 0;
  while (cachedTokens < held.length && cachedTokens < promptTokens.length - 1 && held[cachedTokens] === promptTokens[cachedTokens]) cachedTokens++;

  const sampling = options.sampling ?? {};
  const { presencePenalty, frequencyPenalty, repeatPenalty } = sampling;
  const penalties = presencePenalty !== undefined || frequencyPenalty !== undefined || repeatPenalty !== undefined;
  const bias = tokenBiasOf(model, sampling.logitBias);
  const forced = options.toolChoice !== "auto";

  // Each call's arguments as streamed; trailing whitespace (the JSON grammar ends in newlines) held until more comes.
  const calls: { name: string; arguments: string; held: string }[] = [];
  const piece = (index: number, name: string, chunk: string): void => {
    let call = calls[index];
    const first = !call;
    call ??= calls[index] = { name, arguments: "", held: "" };
    let text = call.held + chunk;
    if (call.arguments === "") text = text.trimStart();
    const body = text.trimEnd();
    call.held = text.slice(body.length);
    if (!body && !first) return;
    call.arguments += body;
    options.onToolCall?.({ index, ...(first ? { name } : {}), arguments: body });
  };

  let text = "";
  let completed = 0; // calls whose generation ended, in order
  let contextFull = false;
  // stops LlamaChat when the client's signal fires, or when the context is full
  const stop = new AbortController();
  const relay = (): void => stop.abort();
  if (options.signal?.aborted) stop.abort();
  options.signal?.addEventListener("abort", relay, { once: true });
  const callDone = (name: string): void => {
    const index = completed++;
    // a function without parameters streams no arguments: it is called with an empty object
    if (!calls[index]) piece(index, name, "");
    if (calls[index]!.arguments === "") piece(index, name, "{}");
  };
  const before = sequence.tokenMeter.getState();
  const chat = new LlamaChat({ contextSequence: sequence, chatWrapper: forced ? forcingCall(wrapper) : wrapper, autoDisposeSequence: false });
  try {
    const result = await chat
      .generateResponse(history, {
        functions,
        documentFunctionParams: true,
        ...(options.parallelToolCalls ? {} : { maxParallelFunctionCalls: 1 }),
        maxTokens: options.maxTokens,
        temperature: options.temperature,
        ...(sampling.topP !== undefined ? { topP: sampling.topP } : {}),
        ...(sampling.topK !== undefined ? { topK: sampling.topK } : {}),
        ...(sampling.minP !== undefined ? { minP: sampling.minP } : {}),
        ...(sampling.seed !== undefined ? { seed: sampling.seed } : {}),
        // LlamaChat's own default is a repeat penalty of 1.1, which OpenAI's API does not have
        repeatPenalty: penalties
          ? {
              lastTokens: PENALTY_LAST_N,
              penalty: repeatPenalty ?? 1,
              ...(presencePenalty !== undefined ? { presencePenalty } : {}),
              ...(frequencyPenalty !== undefined ? { frequencyPenalty } : {}),
            }
          : false,
        ...(bias ? { tokenBias: bias } : {}),
        ...(sampling.stop?.length ? { customStopTriggers: sampling.stop } : {}),
        signal: stop.signal,
        stopOnAbortSignal: true,
        // a full context ends the turn (finish_reason "length"), as on the plain path; LlamaChat would
        // otherwise erase the conversation's start and go on (the calls' syntax is not in max_tokens)
        contextShift: {
          strategy: ({ chatHistory }) => {
            contextFull = true;
            stop.abort();
            return { chatHistory: [...chatHistory], metadata: null };
          },
        },
        onTextChunk: (chunk) => {
          if (chunk) {
            text += chunk;
            options.onText?.(chunk);
          }
        },
        onFunctionCallParamsChunk: (chunk) => piece(chunk.callIndex, chunk.functionName, chunk.paramsChunk),
        onFunctionCall: (call) => callDone(call.functionName),
      })
      .catch((err: unknown) => {
        if (contextFull) return undefined;
        throw err;
      });
    const used = sequence.tokenMeter.getState();
    const completionTokens = used.usedOutputTokens - before.usedOutputTokens;
    // calls LlamaChat returned without telling onFunctionCall end here, in order
    for (const call of (result?.functionCalls ?? []).slice(completed)) callDone(call.functionName);
    const toolCalls = calls.map((c) => ({ name: c.name, arguments: c.arguments }));
    if (!result) return { text, stopReason: "length", cachedTokens, completionTokens, toolCalls };
    const why = result.metadata.stopReason;
    const stopReason: ToolTurnResult["stopReason"] = contextFull || why === "maxTokens" ? "length" : why === "functionCalls" ? "tool_calls" : why === "abort" ? "abort" : "eog";
    // the request's stop text LlamaChat stopped at (its trigger as it matched it: the text's pieces)
    const trigger = result.metadata.stopReason === "customStopTrigger" ? result.metadata.customStopTrigger : [];
    const stopText = trigger.every((p) => typeof p === "string") ? trigger.join("") : undefined;
    return { text: result.response, stopReason, cachedTokens, completionTokens, toolCalls, ...(stopText && sampling.stop?.includes(stopText) ? { stopText } : {}) };
  } finally {
    options.signal?.removeEventListener("abort", relay);
    chat.dispose({ disposeSequence: false });
  }
}
