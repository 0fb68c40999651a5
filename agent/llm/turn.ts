/**
 * One assistant turn on one context sequence, on node-llama-cpp's lowest-level generation API
 * (`LlamaContextSequence.evaluateWithMetadata`): the history rendered through the model's chat wrapper,
 * the KV cache kept up to the first token that differs from the last request on this sequence, tokens
 * sampled and detokenized as they come, generation stopped by the wrapper's stop triggers.
 *
 * A sequence generating alone on its context (no logprobs, no penalties) gets its tokens from the
 * addon's native loop (patches/npm: decode and sample on one worker thread, no JavaScript between two
 * decodes); what it decodes past the point where this turn stops is erased again, so that the sequence
 * holds what it would hold otherwise (native-loop.test.ts).
 *
 * `LlamaChat.generateResponse` does the same and much that chat completions do not use here
 * (function calls, segments, context shift, a default repeat penalty that OpenAI's API does not
 * have), at a measured 0.3–0.5 ms per token on these machines (docs/performance.md).
 */
import {
  LlamaGrammarEvaluationState,
  LlamaText,
  SpecialToken,
  SpecialTokensText,
  TokenBias,
  type ChatHistoryItem,
  type ChatModelFunctions,
  type ChatWrapper,
  type LlamaContextSequence,
  type LlamaGrammar,
  type LlamaModel,
  type Token,
} from "node-llama-cpp";
import type { Sampling } from "../../core/chat.js";
import { rawTokenBytes } from "./token-bytes.js";

/** A generated token's log probability and its most likely alternatives (OpenAI's `logprobs.content[]`). */
export interface TokenLogprob {
  /** The token's text (a lone piece of a multi-byte character is U+FFFD). */
  token: string;
  /** Natural log of its probability in the distribution it was sampled from; at least MIN_LOGPROB. */
  logprob: number;
  /** Its raw bytes, when its text is not them (a piece of a multi-byte character, whose text is U+FFFD). */
  bytes?: number[];
  /** The `top` most likely tokens at its place, most likely first. */
  top: { token: string; logprob: number; bytes?: number[] }[];
  /** Where the token's text starts in the reply, in UTF-16 units (the tokens that complete one character share it). */
  offset: number;
}

export interface TurnOptions {
  maxTokens: number;
  temperature: number;
  /**
   * Log probabilities of the generated tokens, each with this many alternatives (0–20), passed to
   * `onText` with the text they make up. Absent: none computed (they cost a copy of the distribution per token).
   */
  logprobs?: number;
  /** Sampling beyond the temperature; `stop` texts end the turn like the template's own triggers. */
  sampling?: Sampling;
  /**
   * Tokens are sampled only where this grammar allows (structured output). Its stop triggers end the
   * turn, and with `trimWhitespaceSuffix` the whitespace the turn ends with is never released.
   */
  grammar?: LlamaGrammar;
  signal?: AbortSignal;
  /** Each piece of text as it becomes final, with the log probabilities of the tokens it completes (when asked for). */
  onText?: (text: string, logprobs?: TokenLogprob[]) => void;
}

export interface TurnResult {
  text: string;
  /** "eog": an end-of-generation token or a stop trigger; "length": `maxTokens` reached; "abort": the signal fired. */
  stopReason: "eog" | "length" | "abort";
  /** Tokens sampled (an end-of-generation token included, as llama.cpp's server counts). */
  completionTokens: number;
  /** Prompt tokens kept from the sequence's KV cache (not evaluated again). */
  cachedTokens: number;
  /** The request's stop text (`sampling.stop`) the turn stopped at, when it did (never part of `text`). */
  stopText?: string;
}

/** What a chat template renders for a conversation: the prompt's tokens and how the turn ends. */
export interface RenderedPrompt {
  tokens: Token[];
  stops: StopTriggers;
}

/**
 * Renders `history` (ending with the model's turn, possibly a prefill) through the chat wrapper, with
 * `functions` documented as the template documents them (tool-turn.ts).
 */
export function renderPrompt(model: LlamaModel, wrapper: ChatWrapper, history: ChatHistoryItem[], functions?: ChatModelFunctions): RenderedPrompt {
  const rendered = history.at(-1)?.type === "model" ? history : [...history, { type: "model" as const, response: [] }];
  const state = wrapper.generateContextState({ chatHistory: rendered, ...(functions ? { availableFunctions: functions, documentFunctionParams: true } : {}) });
  return { tokens: state.contextText.tokenize(model.tokenizer), stops: StopTriggers.from(model, state.stopGenerationTriggers) };
}

/**
 * A raw prompt (no chat template): the BOS token when the model's vocabulary wants one, then the text
 * tokenized as text, so that a tenant's `<|im_end|>` is characters, not the special token. The turn
 * ends at the model's end-of-generation tokens (or max_tokens, or a stop text).
 */
export function renderRawPrompt(model: LlamaModel, text: string): RenderedPrompt {
  const bos = model.tokens.shouldPrependBosToken ? model.tokens.bos : null;
  const tokens = model.tokenize(text, false, bos !== null ? "trimLeadingSpace" : undefined);
  return { tokens: bos !== null ? [bos, ...tokens] : tokens, stops: StopTriggers.from(model, []) };
}

/**
 * The wrapper's stop triggers, split by how they are seen: single special tokens end the turn by
 * id (the end-of-generation tokens always do); text triggers are matched in the generated text,
 * which is held back while it could still be the start of one.
 */
export class StopTriggers {
  private constructor(
    private readonly tokens: ReadonlySet<Token>,
    private readonly texts: readonly string[],
  ) {}

  static from(model: LlamaModel, triggers: readonly LlamaText[]): StopTriggers {
    const tokens = new Set<Token>();
    const texts: string[] = [];
    for (const trigger of triggers) {
      const special = trigger.values.every((v) => v instanceof SpecialToken || v instanceof SpecialTokensText);
      if (special) {
        const ids = LlamaText(trigger).tokenize(model.tokenizer);
        if (ids.length === 1) tokens.add(ids[0]!);
        else texts.push(model.detokenize(ids, true));
      } else {
        const text = trigger.values.map((v) => (typeof v === "string" ? v : v instanceof SpecialTokensText ? v.value : "")).join("");
        if (text) texts.push(text);
      }
    }
    return new StopTriggers(tokens, texts);
  }

  /** These triggers and the texts `more` (a request's `stop`), listed first: a tie in `scan` goes to them. */
  with(more: readonly string[] = []): StopTriggers {
    const texts = more.filter((t) => t.length > 0);
    return texts.length ? new StopTriggers(this.tokens, [...texts, ...this.texts]) : this;
  }

  isStopToken(token: Token): boolean {
    return this.tokens.has(token);
  }

  /**
   * Where a text trigger starts in `text`, or -1, and which one (`matched`: the first listed of those
   * starting there). `safe` is how much of `text` can be released now: everything before a suffix
   * that could still grow into a trigger.
   */
  scan(text: string): { stopAt: number; safe: number; matched?: string } {
    let stopAt = -1;
    let matched: string | undefined;
    for (const t of this.texts) {
      const i = text.indexOf(t);
      if (i >= 0 && (stopAt < 0 || i < stopAt)) {
        stopAt = i;
        matched = t;
      }
    }
    if (stopAt >= 0) return { stopAt, safe: stopAt, matched: matched! };
    let safe = text.length;
    for (const t of this.texts) {
      for (let k = Math.min(t.length - 1, text.length); k > 0; k--) {
        if (text.endsWith(t.slice(0, k))) {
          safe = Math.min(safe, text.length - k);
          break;
        }
      }
    }
    return { stopAt, safe };
  }
}

/** A generated token with what evaluateWithMetadata() tells of it. */
interface Scored {
  token: Token;
  confidence?: number;
  probabilities?: Map<Token, number>;
}

/** The lowest log probability reported (OpenAI's floor): a probability of 0 has no finite log. */
export const MIN_LOGPROB = -9999;

const logOf = (p: number): number => Math.max(MIN_LOGPROB, Math.log(p));

/** The log probability entry of `token` (just generated, last of `generated`) and its `top` alternatives. */
function scoreToken(
  model: LlamaModel,
  generated: readonly Token[],
  token: Token,
  confidence: number,
  probabilities: Map<Token, number> | undefined,
  top: number,
  offset: number,
): TokenLogprob {
  const before = generated.slice(Math.max(0, generated.length - 1 - DETOKENIZE_CONTEXT), -1);
  const textOf = (t: Token) => model.detokenize([t], false, before);
  const entry = (t: Token, logprob: number) => {
    const text = textOf(t);
    const bytes = rawTokenBytes(model, t, text);
    return { token: text, logprob, ...(bytes ? { bytes } : {}) };
  };
  const alternatives: TokenLogprob["top"] = [];
  if (probabilities && top > 0) {
    // Kiln's addon returns the 64 most likely, most likely first (patches/npm); sorted again all the same, as it costs nothing
    for (const [t, p] of [...probabilities].sort((a, b) => b[1] - a[1]).slice(0, top)) alternatives.push(entry(t, logOf(p)));
  }
  return { ...entry(token, logOf(confidence)), top: alternatives, offset };
}

/** A grammar's stop triggers as texts (node-llama-cpp's JSON grammars end with four newlines). */
function grammarStopTexts(grammar: LlamaGrammar): string[] {
  return grammar.stopGenerationTriggers.map((t) =>
    typeof t === "string" ? t : Array.isArray(t) ? t.filter((v) => typeof v === "string").join("") : (t as LlamaText).values.filter((v) => typeof v === "string").join(""),
  );
}

/** Tokens kept in front of new ones when detokenizing, so that leading spaces come out right. */
const DETOKENIZE_CONTEXT = 4;
/** Longest UTF-8 sequence: text is held while it ends in an incomplete one, for at most this many tokens. */
const MAX_UTF8_TOKENS = 4;

/**
 * Lets the event loop through one poll phase (two `setImmediate` turns: the first ends the current
 * one). Called once the first text is out, before the next token is asked for: on a CPU node that
 * decode takes every core, and the first text's way out (the link's write; in `kiln dev` also the
 * scheduler's read and SSE write, and the client's read) waited for cores behind it. 45 M model on
 * two cores: the added time to first token through the fleet fell from 9–10 ms to 4–5 ms.
 */
async function letTheFirstTextOut(): Promise<void> {
  for (let turn = 0; turn < 2; turn++) await new Promise((resolve) => setImmediate(resolve));
}

/**
 * Generates the model's turn on `sequence` for `prompt`. The caller owns the sequence for the
 * duration (one turn per sequence at a time).
 */
export async function generateTurn(sequence: LlamaContextSequence, prompt: RenderedPrompt, options: TurnOptions): Promise<TurnResult> {
  const model = sequence.model;
  // Keep the cached prefix, but always evaluate at least the prompt's last token for its logits.
  await sequence.adaptStateToTokens(prompt.tokens, false);
  if (sequence.nextTokenIndex >= prompt.tokens.length) {
    await sequence.eraseContextTokenRanges([{ start: prompt.tokens.length - 1, end: sequence.nextTokenIndex }]);
  }
  const cachedTokens = sequence.nextTokenIndex;
  const input = prompt.tokens.slice(cachedTokens);

  const generated: Token[] = [];
  let sampled = 0; // generated tokens plus a final end-of-generation token, which evaluate() does not yield
  let text = ""; // released to onText
  let held = ""; // decoded, not yet released (it could be the start of a stop trigger)
  let undecoded: Token[] = []; // sampled, not yet decoded (an incomplete UTF-8 sequence)
  let stopReason: TurnResult["stopReason"] = "eog";
  let stopText: string | undefined;
  // Log probabilities wait for their token's text: `end` is where it ends in the whole reply, set once decoded.
  const scored: { entry: TokenLogprob; end: number }[] = [];
  const release = (upTo: number): void => {
    if (upTo <= 0) return;
    const piece = held.slice(0, upTo);
    held = held.slice(upTo);
    text += piece;
    if (options.logprobs === undefined) {
      options.onText?.(piece);
      return;
    }
    let n = 0;
    while (n < scored.length && scored[n]!.end <= text.length) n++;
    options.onText?.(
      piece,
      scored.splice(0, n).map((s) => s.entry),
    );
  };
  const decode = (): string => {
    // the tokens before the undecoded ones, prompt included, so that a leading space survives
    const before = generated.length - undecoded.length;
    const context =
      before >= DETOKENIZE_CONTEXT ? generated.slice(before - DETOKENIZE_CONTEXT, before) : [...prompt.tokens.slice(-(DETOKENIZE_CONTEXT - before)), ...generated.slice(0, before)];
    return model.detokenize(undecoded, false, context);
  };

  const signal = options.signal;
  if (signal?.aborted) return { text, stopReason: "abort", completionTokens: 0, cachedTokens };
  const sampling = options.sampling ?? {};
  const grammar = options.grammar;
  const stops = prompt.stops.with([...(sampling.stop ?? []), ...(grammar ? grammarStopTexts(grammar) : [])]);
  const trimEnd = grammar?.trimWhitespaceSuffix ?? false;
  const evaluateOptions = {
    temperature: options.temperature,
    ...samplerOptions(model, sampling, generated),
    ...(grammar ? { grammarEvaluationState: new LlamaGrammarEvaluationState({ model, grammar }) } : {}),
    // no more are taken: a lone sequence generating in the addon's native loop (patches/npm) decodes no further ahead
    maxTokens: options.maxTokens,
  };
  const top = options.logprobs;
  // evaluateWithMetadata directly (evaluate() is a generator around it, one more hop a token)
  const iterator: AsyncGenerator<Scored, void, void> = sequence.evaluateWithMetadata(input, top === undefined ? {} : { confidence: true, probabilities: top > 0 }, evaluateOptions);
  try {
    for (;;) {
      if (sampled >= options.maxTokens) {
        stopReason = "length";
        break;
      }
      const next = await iterator.next();
      if (signal?.aborted) {
        stopReason = "abort";
        break;
      }
      sampled++;
      if (next.done) break; // an end-of-generation token was sampled (evaluate() stops on those and never yields them)
      const { token, confidence, probabilities }: Scored = next.value;
      generated.push(token);
      if (stops.isStopToken(token)) break;
      if (top !== undefined) scored.push({ entry: scoreToken(model, generated, token, confidence ?? 0, probabilities, top, text.length + held.length), end: Infinity });
      undecoded.push(token);
      const piece = decode();
      if (piece.endsWith("\uFFFD") && undecoded.length < MAX_UTF8_TOKENS) continue;
      undecoded = [];
      held += piece;
      for (const s of scored) if (s.end === Infinity) s.end = text.length + held.length;
      const { stopAt, safe, matched } = stops.scan(held);
      if (stopAt >= 0) {
        release(trimEnd ? held.slice(0, stopAt).trimEnd().length : stopAt);
        held = "";
        if (matched !== undefined && sampling.stop?.includes(matched)) stopText = matched;
        break;
      }
      const first = text.length === 0;
      release(trimEnd ? Math.min(safe, held.trimEnd().length) : safe);
      if (first && text.length > 0 && sampled < options.maxTokens) await letTheFirstTextOut();
    }
  } finally {
    await iterator.return();
  }
  if (stopReason !== "abort") {
    if (undecoded.length > 0) held += decode();
    for (const s of scored) if (s.end === Infinity) s.end = text.length + held.length;
    release(trimEnd ? held.trimEnd().length : held.length);
  }
  return { text, stopReason, completionTokens: sampled, cachedTokens, ...(stopText !== undefined ? { stopText } : {}) };
}

/** How many of the last generated tokens the penalties look at (llama.cpp's server default). */
export const PENALTY_LAST_N = 64;

/** `logit_bias` as node-llama-cpp's TokenBias (−100 bans the token), or undefined for none. */
export function tokenBiasOf(model: LlamaModel, logitBias: Sampling["logitBias"]): TokenBias | undefined {
  if (!logitBias || Object.keys(logitBias).length === 0) return undefined;
  const bias = new TokenBias(model.tokenizer);
  for (const [id, value] of Object.entries(logitBias)) bias.set(Number(id) as Token, value <= -100 ? "never" : { logit: value });
  return bias;
}

/**
 * node-llama-cpp's sampler options for `sampling` (absent fields left out: its defaults). The
 * penalties punish the tokens generated so far in this turn (OpenAI's: "the text so far"), the last
 * PENALTY_LAST_N of them; `generated` grows as the turn runs.
 */
function samplerOptions(model: LlamaModel, sampling: Sampling, generated: readonly Token[]) {
  const { presencePenalty, frequencyPenalty, repeatPenalty } = sampling;
  const penalties = presencePenalty !== undefined || frequencyPenalty !== undefined || repeatPenalty !== undefined;
  const bias = tokenBiasOf(model, sampling.logitBias);
  return {
    ...(sampling.topP !== undefined ? { topP: sampling.topP } : {}),
    ...(sampling.topK !== undefined ? { topK: sampling.topK } : {}),
    ...(sampling.minP !== undefined ? { minP: sampling.minP } : {}),
    ...(sampling.seed !== undefined ? { seed: sampling.seed } : {}),
    ...(penalties
      ? {
          repeatPenalty: {
            punishTokens: () => generated.slice(-PENALTY_LAST_N),
            maxPunishTokens: PENALTY_LAST_N,
            penalty: repeatPenalty ?? 1,
            ...(presencePenalty !== undefined ? { presencePenalty } : {}),
            ...(frequencyPenalty !== undefined ? { frequencyPenalty } : {}),
          },
        }
      : {}),
    ...(bias ? { tokenBias: bias } : {}),
  };
}
