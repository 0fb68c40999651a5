/**
 * A greedy reference for chat text, independent of Kiln's engine (agent/llm/*): the conversation
 * rendered as ChatML by hand (the fabricated models' template), then one token at a time through
 * node-llama-cpp's `LlamaContextSequence.controlledEvaluate`, taking the argmax of the raw logits,
 * until `maxTokens` or an end-of-generation token, and the generated tokens detokenized at once.
 *
 * Greedy here is what llama.cpp's greedy sampler (temperature 0) does: the highest logit, the
 * lowest token id on an exact tie. Not `LlamaChat.generateResponse` nor `sequence.evaluate`
 * broken off early: a reference built on either hung after a few conversations (node-llama-cpp
 * 3.22.1, cause unknown); `controlledEvaluate` runs exactly the tokens it is given and returns.
 *
 * Not modelled: ChatML's text stop trigger (the bytes "<|im_end|>" generated as plain text rather
 * than as the control token). Should the model ever do that, the product stops and the reference
 * does not, so a test fails loudly rather than passes wrongly.
 */
import { getLlama, type ControlledEvaluateInputItem, type Llama, type LlamaContext, type LlamaContextSequence, type LlamaModel, type Token } from "node-llama-cpp";

export interface ReferenceMessage {
  role: "system" | "user" | "assistant";
  content: string;
}

export interface ReferenceAnswer {
  text: string;
  /** OpenAI's finish_reason: "length" when `maxTokens` were generated, else "stop" (an end-of-generation token). */
  finishReason: "stop" | "length";
  /** Tokens generated, a final end-of-generation token included (as llama.cpp's server counts). */
  completionTokens: number;
}

/** ChatML, the template of the fabricated test models, with the generation prompt. */
export function chatml(messages: readonly ReferenceMessage[]): string {
  return messages.map((m) => `<|im_start|>${m.role}\n${m.content}<|im_end|>\n`).join("") + "<|im_start|>assistant\n";
}

export class GreedyReference {
  /** References run one at a time on the one sequence. */
  private queue: Promise<unknown> = Promise.resolve();

  private constructor(
    private readonly llama: Llama,
    readonly model: LlamaModel,
    private readonly context: LlamaContext,
    private readonly sequence: LlamaContextSequence,
  ) {}

  /** Loads `modelPath` on the CPU, with its own llama.cpp binding, model and one-sequence context. */
  static async load(modelPath: string, contextSize = 2048): Promise<GreedyReference> {
    const llama = await getLlama({ gpu: false, build: "never" });
    try {
      const model = await llama.loadModel({ modelPath });
      const template = model.fileInfo.metadata.tokenizer?.chat_template;
      if (typeof template !== "string" || !template.includes("<|im_start|>")) {
        await model.dispose();
        throw new Error(`${modelPath}: the reference renders ChatML only`);
      }
      const context = await model.createContext({ contextSize, sequences: 1, threads: 1 });
      return new GreedyReference(llama, model, context, context.getSequence());
    } catch (err) {
      await llama.dispose();
      throw err;
    }
  }

  /** The prompt's tokens: BOS (which node-llama-cpp's ChatML wrapper adds), then ChatML tokenized with special tokens. */
  promptTokens(messages: readonly ReferenceMessage[]): Token[] {
    const bos = this.model.tokens.bos;
    if (bos === null) throw new Error("the model has no BOS token");
    return [bos, ...this.model.tokenize(chatml(messages), true)];
  }

  /** The greedy answer to `messages` in at most `maxTokens` tokens. */
  complete(messages: readonly ReferenceMessage[], maxTokens: number): Promise<ReferenceAnswer> {
    const run = this.queue.then(() => this.generate(this.promptTokens(messages), maxTokens));
    this.queue = run.catch(() => undefined);
    return run;
  }

  async dispose(): Promise<void> {
    await this.queue;
    await this.context.dispose();
    await this.model.dispose();
    await this.llama.dispose();
  }

  private async generate(prompt: Token[], maxTokens: number): Promise<ReferenceAnswer> {
    await this.sequence.clearHistory();
    const imEnd = this.model.tokenize("<|im_end|>", true);
    const stop = (t: Token): boolean => this.model.isEogToken(t) || t === this.model.tokens.eos || (imEnd.length === 1 && t === imEnd[0]);
    const generated: Token[] = [];
    // The prompt, asking for the logits after its last token; then each chosen token, likewise.
    let input: Token[] = prompt;
    while (generated.length < maxTokens) {
      const last = input.length - 1;
      const items = input.map((t, i): ControlledEvaluateInputItem => (i === last ? [t, { generateNext: { logits: true } }] : t));
      const output = await this.sequence.controlledEvaluate(items);
      const logits = output[last]?.next.logits;
      if (!logits) throw new Error("controlledEvaluate returned no logits");
      const token = argmax(logits);
      if (stop(token)) return { text: this.decode(prompt, generated), finishReason: "stop", completionTokens: generated.length + 1 };
      generated.push(token);
      input = [token];
    }
    return { text: this.decode(prompt, generated), finishReason: "length", completionTokens: generated.length };
  }

  /** The generated text, with the prompt's end as context (so that a leading space is kept, as a continuation). */
  private decode(prompt: Token[], generated: Token[]): string {
    return this.model.detokenize(generated, false, prompt.slice(-4));
  }
}

/** The token with the highest logit; the lowest id among exact ties (llama.cpp's greedy sampler scans ids in order). */
function argmax(logits: ReadonlyMap<Token, number>): Token {
  let best: Token | undefined;
  let max = -Infinity;
  for (const [token, logit] of logits) {
    if (logit > max || (logit === max && best !== undefined && token < best)) {
      best = token;
      max = logit;
    }
  }
  if (best === undefined) throw new Error("no logits");
  return best;
}
