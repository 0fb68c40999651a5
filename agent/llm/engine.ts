/**
 * The agent's chat engine on node-llama-cpp: loads each GGUF file once, serves one or more catalog
 * ids from it, and generates OpenAI-style chat completions with the model's own chat template.
 * Knows nothing of gRPC or HTTP.
 */
import { createHash, randomInt } from "node:crypto";
import { stat } from "node:fs/promises";
import { resolve } from "node:path";
import {
  getLlama,
  LlamaLogLevel,
  type ChatHistoryItem,
  type ChatModelFunctions,
  type Llama,
  type LlamaContextSequence,
  type LlamaGpuType,
  type LlamaGrammar,
  type LlamaModel,
  type Token,
} from "node-llama-cpp";
import { rememberAtMost } from "../../core/bounded.js";
import { checkToolOrder, type ChatMessage, type ChatRole, type ResponseFormat, type Sampling, type ToolCallDelta, type ToolChoice, type ToolFunction } from "../../core/chat.js";
import { checkJsonSchema, checkToolParameters, documentedBytes, FUNCTION_NAME, toGrammarSchema } from "../../core/json-schema.js";
import type { Logger } from "../../core/log.js";
import type { GpuKind } from "../../core/prebuilt.js";
import { MAX_JSON_DEPTH, nestedDeeperThan } from "../../core/validate.js";
import {
  ContextLengthExceededError,
  GenerationAbortedError,
  InvalidChoicesError,
  InvalidLogitBiasError,
  InvalidResponseFormatError,
  InvalidToolsError,
  LlmEngineError,
  ModelLoadError,
  ModelNotServedError,
} from "./errors.js";
import { loadedBinaries } from "./binaries.js";
import { gpuLayout } from "./layout.js";
import { modelFingerprint } from "./fingerprint.js";
import { splitParts } from "./split.js";
import { ModelPool, type Slot } from "./pool.js";
import { functionsFor, generateToolTurn } from "./tool-turn.js";
import { generateTurn, type TokenLogprob } from "./turn.js";
import { GatedTokenPredictor, speculationText, type Speculation } from "./speculative.js";

export interface LlmEngineOptions {
  /**
   * Catalog ids and the GGUF file each is served from; ids sharing a file share one loaded model (and
   * the first `speculative` given among them). `speculative`: speculative decoding for the id's slots
   * (a draft's source a local path here); none when unset.
   */
  models: { id: string; path: string; speculative?: Speculation }[];
  /** Parallel sequences (slots) per loaded file. */
  sequences: number;
  /** Context tokens per sequence, capped at the model's trained size. */
  contextSize: number;
  /** Compute threads. */
  threads: number;
  /** Tokens per batch; node-llama-cpp's default when unset. */
  batchSize?: number;
  /** Backend: `"auto"` tries CUDA/Vulkan/Metal prebuilt binaries, then falls back to CPU. Never builds from source. */
  gpu: GpuKind;
  logger: Logger;
}

export type { ChatRole };

/** A replica's shape: its slots, each slot's context, and where it sits on the node's GPUs. */
export interface ReplicaShape {
  sequences: number;
  contextSize: number;
  /** Bytes it holds on each GPU device, in llama.cpp's device order (the scheduler's plan); llama.cpp's own split when unset. */
  split?: readonly number[];
  /**
   * Speculative decoding (speculative.ts): prompt lookup, or a draft model from a GGUF path on this
   * node (loaded beside the replica, on llama.cpp's default devices; the replica's own model when it
   * is the same file). None when unset.
   */
  speculative?: Speculation;
}

export interface GenerateOptions {
  /** Most tokens to generate; default and ceiling: what is left of the context after the prompt. */
  maxTokens?: number;
  /** Sampling temperature, 0 (greedy) to 2. Default 1, as OpenAI's. */
  temperature?: number;
  /** Sampling beyond the temperature, stop texts included; absent fields keep node-llama-cpp's defaults. */
  sampling?: Sampling;
  /** Output held to JSON by a grammar; absent: free text. */
  responseFormat?: ResponseFormat;
  /** Log probabilities of the generated tokens with this many alternatives each (0–20), given to `onText`; absent: none. */
  logprobs?: number;
  /**
   * Choices to generate, each on a slot of its own after one evaluation of the prompt, shared through
   * the KV cache; each samples with its own seed (the request's seed plus its index, when given).
   * At most the pool's slots. Default 1.
   */
  n?: number;
  /**
   * Functions the model may call: shown to it in its template's syntax, and called with arguments
   * valid for their schemas (tool-turn.ts). Not with `n` > 1, `logprobs` or `responseFormat`.
   */
  tools?: ToolFunction[];
  /** With `tools`: "auto" (default), "none" (tools not shown: a plain turn), "required", or a named function. */
  toolChoice?: ToolChoice;
  /** With `tools`: whether a reply may hold several calls. Default true. */
  parallelToolCalls?: boolean;
  /** Each piece of a function call as it is generated (its first names the function). */
  onToolCall?: (delta: ToolCallDelta) => void;
  /**
   * Whose prompt this is (an opaque account name): a slot's cached prompt is reused only within one
   * scope, so that no account learns, from cached_tokens or timing, what another's prompt began with.
   * Default "" (one scope).
   */
  cacheScope?: string;
  signal?: AbortSignal;
  /** Called with each piece of generated text as it becomes final (and its tokens' log probabilities, when asked for), with its choice's index. */
  onText?: (text: string, logprobs: TokenLogprob[] | undefined, index: number) => void;
  /**
   * Work the agent does for itself (transcript translation), not sent by the scheduler: its slot
   * is counted in the pool's `localBusy` and `onLocalBusy` listeners hear of it. Default false.
   */
  local?: boolean;
}

/** Why a choice ended: the model's end or a stop text, `maxTokens`, or calls of functions for the client to run. */
export type FinishReason = "stop" | "length" | "tool_calls";

export interface GenerateResult {
  /** The first choice's text. */
  text: string;
  /** The first choice's finish reason. */
  finishReason: FinishReason;
  /** Every choice, by index (one unless `n` asked for more); `toolCalls` when it called functions. */
  choices: { text: string; finishReason: FinishReason; completionTokens: number; toolCalls?: { name: string; arguments: string }[] }[];
  promptTokens: number;
  /** Prompt tokens whose KV cache the slot already held (a conversation's earlier turns): not evaluated again. */
  cachedTokens: number;
  /** Tokens generated, all choices together. */
  completionTokens: number;
  /** The request's stop text (`sampling.stop`) the first choice stopped at, when it did. */
  stopText?: string;
}

/** What the engine runs on: "cuda", "vulkan", "metal" or "cpu". */
export type Compute = Exclude<LlamaGpuType, false> | "cpu";

/** Grammars kept compiled, by response format (the least recently used is dropped beyond it). */
const GRAMMAR_CACHE = 32;

export class LlmEngine {
  private readonly localListeners = new Set<() => void>();
  private readonly grammars = new Map<string, Promise<LlamaGrammar>>();
  private loadingBackend: Promise<Llama> | undefined;

  private constructor(
    /** Absent when no model is served: a transcription-only agent never loads llama.cpp. */
    private llama: Llama | undefined,
    private readonly pools: ModelPool[],
    private readonly byId: Map<string, ModelPool>,
    private readonly options: LlmEngineOptions,
  ) {}

  private get logger(): Logger {
    return this.options.logger;
  }

  /** Loads the `models` of `options` (with none, llama.cpp's backend loads at the first `addModel`). */
  static async load(options: LlmEngineOptions): Promise<LlmEngine> {
    const engine = new LlmEngine(undefined, [], new Map(), options);
    if (options.models.length === 0) return engine;
    const llama = await engine.backend();
    try {
      const byPath = new Map<string, ModelPool>();
      for (const { id, path } of options.models) {
        // a split GGUF loads from its first part, whichever part was named (llama.cpp finds the others beside it)
        const file = splitParts(resolve(path))[0]!;
        let pool = byPath.get(file);
        const speculative = options.models.find((m) => m.speculative && splitParts(resolve(m.path))[0] === file)?.speculative;
        if (!pool) byPath.set(file, (pool = await engine.open(id, file, { ...options, ...(speculative ? { speculative } : {}) })));
        pool.modelIds.push(id);
        engine.byId.set(id, pool);
      }
      engine.pools.push(...byPath.values());
    } catch (err) {
      await Promise.all([...new Set(engine.byId.values())].map((p) => p.dispose()));
      await llama.dispose();
      throw err;
    }
    return engine;
  }

  /** llama.cpp's backend, loaded at the first model (or `warm`), once however many ask at once. */
  private backend(): Promise<Llama> {
    if (this.llama) return Promise.resolve(this.llama);
    this.loadingBackend ??= loadBackend(this.options.gpu, this.options.threads, this.logger).then((llama) => {
      const { addon, folder, kilnAddon, backends } = loadedBinaries();
      this.logger.info({ compute: llama.gpu || "cpu", addon, folder, kilnAddon, backends }, "llama.cpp binaries loaded");
      return (this.llama = llama);
    });
    this.loadingBackend.catch(() => (this.loadingBackend = undefined));
    return this.loadingBackend;
  }

  /**
   * The GPU devices llama.cpp runs on, in its order (the order a replica's planned bytes per device
   * follow), with their memory; empty on the CPU. Loads the backend, so that the first replica a
   * scheduler places does not wait for it.
   */
  async gpuDevices(): Promise<{ name: string; totalBytes: number; freeBytes: number }[]> {
    const llama = await this.backend();
    return llama.gpu ? llama.getGpuDevices() : [];
  }

  /**
   * One GGUF file loaded into a pool of `shape.sequences` slots, on the GPUs as `shape.split` plans
   * (bytes per device). `onProgress` hears the share of the model's weights loaded, from
   * node-llama-cpp, as it grows (not the draft's).
   */
  private async open(id: string, file: string, shape: ReplicaShape, signal?: AbortSignal, onProgress?: (loaded: number) => void): Promise<ModelPool> {
    const llama = await this.backend();
    const started = performance.now();
    // a split GGUF's other parts must be there beside its first
    const missing = await firstMissing(splitParts(file).slice(1));
    if (missing)
      throw new ModelLoadError(id, file, new Error(`its part ${missing} is missing (llama.cpp loads a split GGUF from its first part, and the other parts from beside it)`));
    const layout = llama.gpu && shape.split ? gpuLayout(shape.split) : undefined;
    if (layout) {
      const gpus = (await llama.getGpuDevices()).length;
      if (shape.split!.length !== gpus)
        throw new ModelLoadError(id, file, new Error(`its placement names ${shape.split!.length} devices, and llama.cpp sees ${gpus} GPUs on this node`));
      // node-llama-cpp's own addon ignores the layout: on several GPUs llama.cpp would spread the model over all of them
      if (gpus > 1 && !loadedBinaries().kilnAddon)
        throw new ModelLoadError(id, file, new Error("node-llama-cpp's own addon is loaded, not Kiln's build, and it cannot place a model on chosen GPUs (npm run build:llama)"));
    }
    const model = await llama
      .loadModel({ modelPath: file, ...layout, ...(signal ? { loadSignal: signal } : {}), ...(onProgress ? { onLoadProgress: onProgress } : {}) })
      .catch((err: unknown) => {
        throw new ModelLoadError(id, file, err);
      });
    const { folder, kilnAddon } = loadedBinaries();
    const build = `${llama.llamaCppRelease.release}/${llama.gpu || "cpu"}/${folder ?? "?"}${kilnAddon ? "+kiln" : ""}`;
    const { speculative, ...rest } = shape;
    let draftModel: LlamaModel | undefined;
    if (speculative?.kind === "draft") {
      const draftFile = splitParts(resolve(speculative.source))[0]!;
      draftModel =
        draftFile === file
          ? model // the model as its own draft: one copy of the weights
          : await llama.loadModel({ modelPath: draftFile, ...(signal ? { loadSignal: signal } : {}) }).catch(async (err: unknown) => {
              await model.dispose();
              throw new ModelLoadError(id, file, new Error(`its draft model ${draftFile} did not load (${(err as Error).message})`));
            });
    }
    const pool = await ModelPool.create(file, model, {
      ...this.options,
      ...rest,
      fingerprint: await modelFingerprint(file, build),
      ...(speculative ? { speculative: { speculation: speculative, ...(draftModel ? { draftModel } : {}) } } : {}),
    }).catch(async (err: unknown) => {
      if (draftModel && draftModel !== model) await draftModel.dispose();
      await model.dispose();
      throw new ModelLoadError(id, file, err);
    });
    this.logger.info(
      {
        file,
        sequences: pool.slots,
        contextSize: pool.contextSize,
        threads: this.options.threads,
        ...(layout ? { layout } : {}),
        ...(speculative ? { speculative: speculationText(speculative) } : {}),
        ms: Math.round(performance.now() - started),
      },
      "model loaded",
    );
    return pool;
  }

  /**
   * Loads a replica the scheduler placed: `ids` served from `path` with its own context and slots.
   * Its pool goes last in `modelPools`. Refused when one of the ids is served already. `onProgress`
   * hears the share of the weights loaded as it grows.
   */
  async addModel(ids: readonly string[], path: string, shape: ReplicaShape, signal?: AbortSignal, onProgress?: (loaded: number) => void): Promise<ModelPool> {
    const served = ids.find((id) => this.byId.has(id));
    if (served) throw new LlmEngineError("model_already_loaded", `"${served}" is served already`);
    const pool = await this.open(ids[0]!, splitParts(resolve(path))[0]!, shape, signal, onProgress);
    if (ids.some((id) => this.byId.has(id))) {
      await pool.dispose(); // loaded twice at once: the first one stays
      throw new LlmEngineError("model_already_loaded", `"${ids[0]}" is served already`);
    }
    pool.modelIds.push(...ids);
    for (const id of ids) this.byId.set(id, pool);
    this.pools.push(pool);
    return pool;
  }

  /**
   * Unloads the pool serving `id`: it takes no new request at once, and is freed once the requests it
   * runs end (or `signal` aborts their wait). Returns its index in `modelPools` before it left, or -1.
   */
  async removeModel(id: string, signal?: AbortSignal): Promise<number> {
    const pool = this.byId.get(id);
    if (!pool) return -1;
    const index = this.pools.indexOf(pool);
    this.pools.splice(index, 1);
    for (const served of pool.modelIds) this.byId.delete(served);
    await pool.idle(signal).catch(() => undefined);
    await pool.dispose();
    this.logger.info({ file: pool.path, models: pool.modelIds }, "model unloaded");
    return index;
  }

  get compute(): Compute {
    return !this.llama || this.llama.gpu === false ? "cpu" : this.llama.gpu;
  }

  /** The loaded pools, in load order (their index is the pool's number on the wire). */
  get modelPools(): readonly ModelPool[] {
    return this.pools;
  }

  serves(id: string): boolean {
    return this.byId.has(id);
  }

  /** Device memory as llama.cpp sees it (VRAM on a GPU, system memory on CPU). */
  async memory(): Promise<{ used: number; total: number }> {
    if (!this.llama) return { used: 0, total: 0 };
    const state = await this.llama.getVramState();
    return { used: state.used, total: state.total };
  }

  /**
   * Generates the assistant's reply to `input`'s messages, or continues its raw `prompt` (no chat
   * template). Waits for a free slot when all are busy. A trailing assistant message is continued
   * (prefill), as llama.cpp's server does.
   */
  async generate(modelId: string, input: ChatMessage[] | { prompt: string }, options: GenerateOptions = {}): Promise<GenerateResult> {
    const pool = this.pool(modelId);
    const tools = toolsOf(input, options);
    const textBytes = Array.isArray(input)
      ? input.reduce((n, m) => n + Buffer.byteLength(m.content) + (m.toolCalls ?? []).reduce((k, c) => k + Buffer.byteLength(c.arguments), 0), 0)
      : Buffer.byteLength(input.prompt);
    // the tools' documentation is counted as rendered, not as sent (nested arrays are written out several times)
    const toolBytes = tools ? options.tools!.reduce((n, t) => n + t.name.length + Buffer.byteLength(t.description ?? "") + documentedBytes(t.parameters), 0) : 0;
    pool.refuseUnfittable(textBytes + toolBytes);
    const history = Array.isArray(input) ? toHistory(input) : undefined;
    const prompt = history ? pool.render(history, tools?.functions) : pool.renderRaw((input as { prompt: string }).prompt);
    const promptTokens = prompt.tokens.length;
    const room = pool.contextSize - promptTokens;
    if (room < 1) throw ContextLengthExceededError.tokens(promptTokens, pool.contextSize);
    const maxTokens = Math.min(options.maxTokens ?? room, room);
    const sampling = options.sampling ?? {};
    for (const id of Object.keys(sampling.logitBias ?? {})) {
      if (!(Number(id) < pool.vocabularySize)) throw new InvalidLogitBiasError(id, pool.vocabularySize);
    }

    const grammar = options.responseFormat ? await this.grammarFor(options.responseFormat) : undefined;

    const n = options.n ?? 1;
    if (n > pool.slots) throw new InvalidChoicesError(n, pool.slots);
    const slots: Slot[] = [];
    /** Tokens each slot generated, by slot, once its turn ended (what a speculating slot's gate counts). */
    let generated: number[] = [];
    try {
      const want = { scope: options.cacheScope ?? "", tokens: prompt.tokens };
      for (let i = 0; i < n; i++) {
        slots.push(await pool.acquire(options.signal, want));
        if (options.local) this.changeLocal(pool, +1);
      }
      const scope = options.cacheScope ?? "";
      for (const slot of slots) {
        if (slot.scope !== scope) {
          await slot.sequence.clearHistory(); // another account's prompt: not a prefix to reuse
          await gatedPredictor(slot)?.forget(); // nor in its draft's cache
          slot.scope = scope;
        }
      }
      if (tools) {
        const turn = await generateToolTurn(slots[0]!.sequence, pool.chatWrapper, history!, tools.functions, prompt.tokens, {
          tools: options.tools!,
          toolChoice: tools.choice,
          parallelToolCalls: options.parallelToolCalls ?? true,
          maxTokens,
          temperature: options.temperature ?? 1,
          sampling,
          ...(options.signal ? { signal: options.signal } : {}),
          ...(options.onText ? { onText: (text: string) => options.onText!(text, undefined, 0) } : {}),
          ...(options.onToolCall ? { onToolCall: options.onToolCall } : {}),
        });
        generated = [turn.completionTokens];
        if (turn.stopReason === "abort") throw new GenerationAbortedError({ promptTokens, completionTokens: turn.completionTokens });
        const finishReason: FinishReason = turn.stopReason === "eog" ? "stop" : turn.stopReason;
        return {
          text: turn.text,
          finishReason,
          promptTokens,
          cachedTokens: turn.cachedTokens,
          completionTokens: turn.completionTokens,
          ...(turn.stopText !== undefined ? { stopText: turn.stopText } : {}),
          choices: [{ text: turn.text, finishReason, completionTokens: turn.completionTokens, ...(turn.toolCalls.length > 0 ? { toolCalls: turn.toolCalls } : {}) }],
        };
      }
      const cachedTokens = slots.length > 1 ? await sharePrompt(slots, prompt.tokens) : 0;
      const turns = await Promise.all(
        slots.map((slot, index) =>
          generateTurn(slot.sequence, prompt, {
            maxTokens,
            temperature: options.temperature ?? 1,
            sampling: n > 1 ? { ...sampling, seed: choiceSeed(sampling.seed, index) } : sampling,
            ...(grammar ? { grammar } : {}),
            ...(options.logprobs !== undefined ? { logprobs: options.logprobs } : {}),
            ...(options.signal ? { signal: options.signal } : {}),
            ...(options.onText ? { onText: (text: string, logprobs?: TokenLogprob[]) => options.onText!(text, logprobs, index) } : {}),
          }),
        ),
      );
      generated = turns.map((t) => t.completionTokens);
      if (turns.some((t) => t.stopReason === "abort")) throw new GenerationAbortedError({ promptTokens, completionTokens: turns.reduce((sum, t) => sum + t.completionTokens, 0) });
      const choices = turns.map((t) => ({ text: t.text, finishReason: t.stopReason === "length" ? ("length" as const) : ("stop" as const), completionTokens: t.completionTokens }));
      return {
        text: choices[0]!.text,
        finishReason: choices[0]!.finishReason,
        choices,
        promptTokens,
        cachedTokens: n > 1 ? cachedTokens : turns[0]!.cachedTokens,
        completionTokens: choices.reduce((sum, c) => sum + c.completionTokens, 0),
        ...(turns[0]!.stopText !== undefined ? { stopText: turns[0]!.stopText } : {}),
      };
    } catch (err) {
      if (err instanceof LlmEngineError) throw err;
      if (options.signal?.aborted) throw new GenerationAbortedError();
      throw new LlmEngineError("engine_error", `generation failed: ${(err as Error).message}`);
    } finally {
      for (const [i, slot] of slots.entries()) gatedPredictor(slot)?.endTurn(generated[i] ?? 0);
      for (const slot of slots) pool.release(slot);
      if (options.local && slots.length > 0) this.changeLocal(pool, -slots.length);
    }
  }

  /**
   * The grammar of a response format, built once and kept by the schema's digest (GRAMMAR_CACHE;
   * llama.cpp still parses its text for each request's evaluation state): node-llama-cpp's JSON
   * grammar, or one built from the schema. A schema outside the subset a grammar enforces, or one
   * llama.cpp's grammar parser refuses, is an InvalidResponseFormatError.
   */
  private grammarFor(format: ResponseFormat): Promise<LlamaGrammar> {
    const llama = this.llama!;
    const key = format.type === "json_object" ? "json_object" : createHash("sha256").update(JSON.stringify(format.schema)).digest("hex");
    let grammar = this.grammars.get(key);
    if (grammar) {
      this.grammars.delete(key); // most recently used last
    } else {
      if (format.type === "json_schema") {
        const problem = checkJsonSchema(format.schema);
        if (problem) return Promise.reject(new InvalidResponseFormatError(`response_format.json_schema.schema${problem.path ? `.${problem.path}` : ""}: ${problem.message}`));
      }
      const building: Promise<LlamaGrammar> = (
        format.type === "json_object" ? llama.getGrammarFor("json") : llama.createGrammarForJsonSchema(toGrammarSchema(format.schema) as never)
      ).catch((err: unknown) => {
        if (this.grammars.get(key) === building) this.grammars.delete(key);
        throw new InvalidResponseFormatError(`the grammar for it could not be built (${(err as Error).message})`);
      });
      grammar = building;
    }
    rememberAtMost(this.grammars, key, grammar, GRAMMAR_CACHE);
    return grammar;
  }

  /**
   * Embeddings of `inputs` from `modelId`'s embedding context, in order. Text that cannot fit is
   * refused before it is tokenized, as for generation.
   */
  async embed(modelId: string, inputs: readonly string[], options: { dimensions?: number; signal?: AbortSignal } = {}): Promise<{ vectors: number[][]; promptTokens: number }> {
    const pool = this.pool(modelId);
    for (const [i, input] of inputs.entries()) pool.refuseUnfittable(Buffer.byteLength(input), `input[${i}]`);
    try {
      return await pool.embed(inputs, options.dimensions, options.signal);
    } catch (err) {
      if (err instanceof LlmEngineError) throw err;
      throw new LlmEngineError("engine_error", `embedding failed: ${(err as Error).message}`);
    }
  }

  /** Calls `listener` whenever a pool's `localBusy` changes; returns the unsubscribe. */
  onLocalBusy(listener: () => void): () => void {
    this.localListeners.add(listener);
    return () => this.localListeners.delete(listener);
  }

  private changeLocal(pool: ModelPool, delta: number): void {
    pool.localBusy += delta;
    for (const listener of this.localListeners) listener();
  }

  async dispose(): Promise<void> {
    await Promise.all(this.pools.map((p) => p.dispose()));
    await this.llama?.dispose();
  }

  private pool(modelId: string): ModelPool {
    const pool = this.byId.get(modelId);
    if (!pool) throw new ModelNotServedError(modelId);
    return pool;
  }
}

/**
 * Evaluates the prompt (all but its last token) once, on the first slot, and copies that KV cache to
 * the others, so n choices cost one prompt evaluation. Returns the prompt tokens the first slot already
 * held. node-llama-cpp's copy between sequences is internal API (`_copyStateFromOtherSequence`, pinned
 * with the package): a slot it cannot copy to evaluates the prompt itself.
 */
async function sharePrompt(slots: Slot[], tokens: Token[]): Promise<number> {
  const source = slots[0]!.sequence;
  await source.adaptStateToTokens(tokens, false);
  if (source.nextTokenIndex > tokens.length - 1) await source.eraseContextTokenRanges([{ start: tokens.length - 1, end: source.nextTokenIndex }]);
  const cached = source.nextTokenIndex;
  const rest = tokens.slice(cached, tokens.length - 1);
  if (rest.length > 0) await source.evaluateWithoutGeneratingNewTokens(rest);
  for (const slot of slots.slice(1)) {
    const target = slot.sequence as unknown as { _copyStateFromOtherSequence?: (from: LlamaContextSequence, upTo: number) => Promise<boolean> };
    const copied = await target._copyStateFromOtherSequence?.(source, tokens.length - 1).catch(() => false);
    if (!copied) await slot.sequence.clearHistory(); // whatever it holds now is not the prompt: it evaluates it itself
  }
  return cached;
}

/** Choice `index`'s seed: the request's plus the index (wrapped to 32 bits), or a random one. */
function choiceSeed(seed: number | undefined, index: number): number {
  return seed === undefined ? randomInt(0, 2 ** 32 - 1) : (seed + index) % 2 ** 32;
}

/**
 * The functions a request offers the model and its choice, or undefined for a plain turn (no tools,
 * or "none"). What cannot go with tools, or a choice naming no tool, is refused.
 */
function toolsOf(input: ChatMessage[] | { prompt: string }, options: GenerateOptions): { functions: ChatModelFunctions; choice: Exclude<ToolChoice, "none"> } | undefined {
  const choice = options.toolChoice ?? "auto";
  if (!options.tools?.length || choice === "none") return undefined;
  if (!Array.isArray(input)) throw new InvalidToolsError("tools: a raw prompt cannot offer tools");
  if ((options.n ?? 1) > 1 || options.logprobs !== undefined || options.responseFormat) throw new InvalidToolsError("tools: not with n > 1, logprobs or response_format");
  const names = new Set<string>();
  for (const [i, tool] of options.tools.entries()) {
    if (!FUNCTION_NAME.test(tool.name) || names.has(tool.name))
      throw new InvalidToolsError(`tools[${i}].function.name: ${JSON.stringify(tool.name.slice(0, 64))} is not a unique name of 1 to 64 letters, digits, _ or -`);
    names.add(tool.name);
    const problem = tool.parameters ? checkToolParameters(tool.parameters) : undefined;
    if (problem) throw new InvalidToolsError(`tools[${i}].function.parameters${problem.path ? `.${problem.path}` : ""}: ${problem.message}`);
  }
  if (typeof choice === "object" && !names.has(choice.name)) throw new InvalidToolsError(`tool_choice: ${JSON.stringify(choice.name.slice(0, 64))} is not one of the tools`);
  return { functions: functionsFor(options.tools, choice), choice };
}

/**
 * The conversation as node-llama-cpp's chat history: an assistant message's calls become function
 * call items of its response, each with the result of the `tool` message answering it (parsed when
 * it is JSON, else its text).
 */
export function toHistory(messages: ChatMessage[]): ChatHistoryItem[] {
  const problem = checkToolOrder(messages);
  if (problem) throw new LlmEngineError("invalid_request", `messages[${problem.index}].${problem.field}: ${problem.message}`);
  const history: ChatHistoryItem[] = [];
  for (const [i, m] of messages.entries()) {
    if (m.role === "tool") continue;
    if (m.role !== "assistant") {
      history.push({ type: m.role, text: m.content });
      continue;
    }
    // its calls are answered by the tool messages right after it (checkToolOrder), each parsed once:
    // ids may repeat from turn to turn (call_0 every time), so a result belongs to the message before it
    const results = new Map<string, string>();
    for (let j = i + 1; messages[j]?.role === "tool"; j++) results.set(messages[j]!.toolCallId!, messages[j]!.content);
    const calls = (m.toolCalls ?? []).map((call, j) => ({
      type: "functionCall" as const,
      name: call.name,
      params: parseJson(call.arguments, `messages[${i}].tool_calls[${j}].function.arguments`),
      result: jsonOrText(results.get(call.id)!),
    }));
    history.push({ type: "model", response: [...(m.content || calls.length === 0 ? [m.content] : []), ...calls] });
  }
  return history;
}

/** A call's arguments: JSON, nested at most MAX_JSON_DEPTH deep (templates render it recursively). */
function parseJson(text: string, field: string): unknown {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new LlmEngineError("invalid_request", `${field}: not JSON`);
  }
  if (nestedDeeperThan(value, MAX_JSON_DEPTH)) throw new LlmEngineError("invalid_request", `${field}: nested deeper than ${MAX_JSON_DEPTH} levels`);
  return value;
}

/** A function's result as the template shows it: parsed when it is JSON (not too deeply nested), else its text. */
function jsonOrText(text: string): unknown {
  try {
    const value: unknown = JSON.parse(text);
    return nestedDeeperThan(value, MAX_JSON_DEPTH) ? text : value;
  } catch {
    return text;
  }
}

/**
 * Loads the llama.cpp binding for the asked backend from the prebuilt binaries only
 * (`build: "never"`): "auto" degrades to CPU when no GPU binary loads; an explicit GPU kind
 * that cannot load is an error rather than a silent CPU run.
 */
/** Device names of software renderers that a GPU backend may enumerate on a machine with no GPU. */
const SOFTWARE_DEVICE = /llvmpipe|lavapipe|softpipe|swiftshader/i;

async function loadBackend(gpu: LlmEngineOptions["gpu"], threads: number, log: Logger): Promise<Llama> {
  const common = {
    build: "never",
    maxThreads: threads,
    // llama.cpp's own progress lines (devices, buffers, the split) at --log-level trace; its warnings at debug
    logLevel: log.isLevelEnabled("trace") ? LlamaLogLevel.info : LlamaLogLevel.warn,
    logger: (level: LlamaLogLevel, message: string) => (level === LlamaLogLevel.info ? log.trace : log.debug).call(log, { level }, message.trim()),
  } as const;
  if (gpu === "cpu") return getLlama({ ...common, gpu: false });
  try {
    const llama = await getLlama({ ...common, gpu });
    // A GPU binary can load with no real device behind it (e.g. Vulkan with only a software
    // rasterizer such as llvmpipe, which Debian's ffmpeg pulls in): that is a CPU, run as one.
    const devices = llama.gpu ? await llama.getGpuDeviceNames() : [];
    if (llama.gpu && gpu === "auto" && devices.every((d) => SOFTWARE_DEVICE.test(d))) {
      log.info({ backend: llama.gpu, devices }, "the GPU backend has no hardware device; using CPU");
      await llama.dispose();
      return getLlama({ ...common, gpu: false });
    }
    log.info({ compute: llama.gpu || "cpu", devices }, "llama.cpp backend loaded");
    return llama;
  } catch (err) {
    if (gpu !== "auto") throw new LlmEngineError("backend_unavailable", `--gpu ${gpu}: no usable prebuilt ${gpu} binary (${(err as Error).message})`);
    log.warn({ err: (err as Error).message }, "no GPU backend could be loaded; falling back to CPU");
    return getLlama({ ...common, gpu: false });
  }
}

/** The first of `paths` that is not a file, if any. */
async function firstMissing(paths: string[]): Promise<string | undefined> {
  for (const path of paths) {
    const s = await stat(path).catch(() => undefined);
    if (!s?.isFile()) return path;
  }
  return undefined;
}

/** The speculation gate's predictor of `slot`'s sequence, when its model speculates. */
function gatedPredictor(slot: Slot): GatedTokenPredictor | undefined {
  const predictor = slot.sequence.tokenPredictor;
  return predictor instanceof GatedTokenPredictor ? predictor : undefined;
}
