/**
 * Speculative decoding on node-llama-cpp's token predictors: a predictor guesses the next tokens, the
 * target model evaluates them in one batch with the token before them, and keeps those its own
 * sampling would have produced (`LlamaContextSequence._speculativeEvaluate`). Greedy output is the
 * same with and without it; only the speed changes.
 *
 * Two predictors: prompt lookup (`InputLookupTokenPredictor`: the last generated tokens found in the
 * sequence's tokens, the tokens that followed them there proposed) and a draft model
 * (`DraftSequenceTokenPredictor`: a smaller model with the same vocabulary generates ahead on a
 * sequence of its own). Each slot's predictor is wrapped in a `GatedTokenPredictor`, which predicts
 * nothing while the pool's `SpeculationGate` is off (acceptance too low to pay), and for the
 * generations whose sampling would not stay the same with it (below).
 */
import type { Speculation } from "../../core/speculation.js";
import { DraftSequenceTokenPredictor, InputLookupTokenPredictor, TokenPredictor, type LlamaContextSequence, type Token } from "node-llama-cpp";

export { speculationText, type Speculation } from "../../core/speculation.js";

/** Tokens a draft model proposes at most per step (node-llama-cpp's default). */
export const DRAFT_MAX_TOKENS = 16;
/**
 * Tokens the target waits for a draft to propose (unless the draft's confidence falls first). With
 * none (node-llama-cpp's default) the target never waits, and the draft, one decode behind, was
 * measured to propose nothing at all.
 */
export const DRAFT_MIN_TOKENS = 4;
/** A draft stops proposing at a token it is less sure of than this (node-llama-cpp's default). */
export const DRAFT_MIN_CONFIDENCE = 0.6;
/** Tokens prompt lookup proposes at most per step. */
export const LOOKUP_MAX_TOKENS = 8;

/**
 * The rule that turns speculation off while it does not pay: Wald's sequential probability ratio
 * test on acceptance, the share of tested predictions validated (the gate's `acceptance`). Each
 * prediction tested is a trial, confirmed or refuted (node-llama-cpp refutes a step's predictions
 * from the first wrong one on: each refuted one counts, as each cost a place in the target's batch
 * and, for a draft, a draft decode), and so is each draft round that proposed nothing (a refusal: it
 * spent a draft decode). Every trial adds to the evidence, the log-likelihood ratio of acceptance
 * `payingAcceptance` over `losingAcceptance`: a confirmed prediction log(paying ÷ losing), a refusal
 * log((1 − paying) ÷ (1 − losing)). From 0 at load and at each probe, evidence reaching
 * log((1 − errorRate) ÷ errorRate) judges speculation on, reaching minus that judges it off. Once
 * on, the evidence stays at most at the on bound, so going off again takes it all the way down to
 * the off bound (twice the refusals a fresh test needs): a paying predictor is not turned off by a
 * short bad stretch, and one that stops paying still is. Defaults: `SPECULATION_RULE`.
 */
export interface SpeculationRule {
  /** An acceptance at which speculation pays (the test's alternative). Default 0.5. */
  payingAcceptance: number;
  /** An acceptance at which it does not pay, below `payingAcceptance` (the test's null hypothesis). Default 0.15. */
  losingAcceptance: number;
  /**
   * A fresh test's chance of each wrong judgement were trials independent: off at
   * `payingAcceptance`, on at `losingAcceptance` (between them, it leans to the nearer one). Default 0.05.
   */
  errorRate: number;
  /** Tokens generated without speculation before the first probe (on again, the test from 0). Default 256. */
  offTokens: number;
  /** Each probe judged off doubles the time off, up to this many tokens. Default 8,192. */
  maxOffTokens: number;
}

/**
 * The default rule: paying at 50 % accepted, losing at 15 %, a fresh test wrong at most 5 % of the
 * time at either. Always refused, speculation is off after 6 refuted predictions (2 rounds of a
 * draft's 4, one of prompt lookup's 8) or 6 empty draft rounds; always confirmed, it is judged on
 * after 3 validated ones, and then takes 12 refusals in a row to go off. The test is indifferent at
 * about 31 % (a refuted draft token costs a draft model's decode and a wider batch, and under about a
 * third accepted that no longer pays on the machines measured: docs/performance.md); once on, with
 * independent trials it goes off after about 65 of them on average at 30 %, 270 at 40 %, 2,200 at
 * 50 % (simulated). Off, it is on again for a probe after 256 tokens generated without, then after
 * 512, 1,024… up to 8,192 while the probes are judged off; back to 256 after one judged on.
 */
export const SPECULATION_RULE: Readonly<SpeculationRule> = { payingAcceptance: 0.5, losingAcceptance: 0.15, errorRate: 0.05, offTokens: 256, maxOffTokens: 8192 };

/**
 * One loaded model's speculation state, shared by its slots: the predictions validated and refuted
 * (node-llama-cpp's counts on each slot's sequence), and whether speculation is on. While off, the
 * slots' predictors predict nothing; after `offTokens` tokens generated (all slots together) it is
 * on again, a probe, until the rule judges it (`SpeculationRule`).
 */
export class SpeculationGate {
  /** Predictions the target model confirmed, since the model loaded. */
  validated = 0;
  /** Predictions the target model refuted, since the model loaded. */
  refuted = 0;
  /** Times speculation went off. */
  turnedOff = 0;
  /** A draft's rounds that proposed nothing. */
  emptyRounds = 0;
  /** The test's evidence: the log-likelihood ratio of paying over losing acceptance, since load or the probe (at most `onAt`). */
  private evidence = 0;
  /** Evidence a confirmed prediction adds, and a refusal (negative). */
  private readonly confirmedWeight: number;
  private readonly refusedWeight: number;
  /** Evidence at which the test judges on (positive), and off (negative). */
  private readonly onAt: number;
  private readonly offAt: number;
  private offLeft = 0;
  private backoff: number;

  constructor(
    readonly speculation: Speculation,
    readonly rule: Readonly<SpeculationRule> = SPECULATION_RULE,
  ) {
    const { payingAcceptance: paying, losingAcceptance: losing, errorRate } = rule;
    if (!(0 < losing && losing < paying && paying < 1)) throw new RangeError(`acceptances: expected 0 < losing (${losing}) < paying (${paying}) < 1`);
    if (!(0 < errorRate && errorRate < 0.5)) throw new RangeError(`errorRate: expected between 0 and 0.5, got ${errorRate}`);
    this.confirmedWeight = Math.log(paying / losing);
    this.refusedWeight = Math.log((1 - paying) / (1 - losing));
    this.onAt = Math.log((1 - errorRate) / errorRate);
    this.offAt = -this.onAt;
    this.backoff = rule.offTokens;
  }

  /** Whether the slots predict now. */
  get on(): boolean {
    return this.offLeft === 0;
  }

  /** Share of tested predictions validated since the model loaded (0 before any). */
  get acceptance(): number {
    const tested = this.validated + this.refuted;
    return tested === 0 ? 0 : this.validated / tested;
  }

  /**
   * Records predictions tested on a slot, and a draft's `empty` rounds (which proposed nothing after
   * a draft decode: each judged as one refuted prediction, though not counted in `refuted`); judges as
   * soon as the evidence reaches a bound (`SpeculationRule`).
   */
  record(validated: number, refuted: number, empty = 0): void {
    if (validated === 0 && refuted === 0 && empty === 0) return;
    this.validated += validated;
    this.refuted += refuted;
    this.emptyRounds += empty;
    if (!this.on) return; // tested after it went off (a step already under way): not judged
    this.evidence += validated * this.confirmedWeight + (refuted + empty) * this.refusedWeight;
    if (this.evidence >= this.onAt) {
      // judged on; the evidence stays at the bound, and going off takes it all the way down
      this.evidence = this.onAt;
      this.backoff = this.rule.offTokens;
    } else if (this.evidence <= this.offAt) {
      this.evidence = 0;
      this.offLeft = this.backoff;
      this.backoff = Math.min(this.backoff * 2, this.rule.maxOffTokens);
      this.turnedOff++;
    }
  }

  /** Counts tokens generated; while off, `offTokens` of them turn it on again for a probe. */
  generated(tokens: number): void {
    if (this.offLeft > 0) this.offLeft = Math.max(0, this.offLeft - tokens);
  }
}

/**
 * Why a generation with these options speculates nothing, or undefined when it may: a grammar
 * (node-llama-cpp tests predictions against a clone of its state that does not follow the
 * predictions before them), penalties (the tokens they punish at a predicted place would lack the
 * predictions before it), or a seed at a temperature above 0 (the same seed would sample other
 * tokens, so a seeded request would not repeat its output).
 */
function unsafeFor(options: Readonly<Record<string, unknown>>): string | undefined {
  if (options.grammarEvaluationState != null) return "grammar";
  const penalty = options.repeatPenalty as { punishTokens?: unknown } | false | undefined;
  if (penalty && penalty.punishTokens != null) return "penalties";
  if (typeof options.temperature === "number" && options.temperature > 0 && options.seed !== undefined) return "seed";
  return undefined;
}

/**
 * A slot's predictor: `inner` (prompt lookup or a draft sequence) while its gate is on and the
 * generation's sampling allows (`unsafeFor`), nothing otherwise. Reads node-llama-cpp's counts of
 * validated and refuted predictions on the target sequence at each step and gives the gate the
 * difference. While it predicts nothing, `inner` is not told the tokens: it is reset with the
 * sequence's tokens when predictions start again (a draft model then evaluates what it missed in
 * one batch).
 */
export class GatedTokenPredictor extends TokenPredictor {
  private target?: LlamaContextSequence;
  private state: Token[] = [];
  private evaluateOptions: Parameters<TokenPredictor["reset"]>[0]["evaluateOptions"] = {};
  /** The generation may speculate (its options allow it). */
  private allowed = false;
  /** `inner` holds the sequence's tokens (it was reset and told every token since). */
  private inSync = false;
  private seenValidated = 0;
  private seenRefuted = 0;

  /** The turn under way went without the predictor (`kilnBypasses`) or left it (`kilnHandOff`): `endTurn` counts its tokens. */
  private bypassed = false;
  /** Tokens of the turn under way the gate was told of as they came (`pushTokens`), before any hand-off. */
  private counted = 0;

  constructor(
    readonly gate: SpeculationGate,
    readonly inner: TokenPredictor,
  ) {
    super();
  }

  /**
   * Asked by Kiln's patch (`_speculativeEvaluate`) between two tokens of a turn that began
   * speculating: true lets the rest of the turn go on without the predictor, on the plain path,
   * once the gate has turned off in it and the generation is one that may speculate (for one that
   * may not, a seeded sample say, another sampler would change its tokens). The turn then counts as
   * a bypassed one: `endTurn` counts its tokens after the hand-off (those before, `pushTokens` did).
   */
  kilnHandOff(): boolean {
    if (!this.allowed || this.gate.on) return false;
    this.bypassed = true;
    return true;
  }

  /**
   * Asked by Kiln's patch (`evaluateWithMetadata`) as a generation begins with `options`: true to
   * evaluate it without the predictor, on node-llama-cpp's plain path (for a lone sequence the
   * addon's native loop), when the gate is off or the options never speculate (`unsafeFor`). A
   * predictor that predicts nothing still costs the speculative path, which sets the sampler up for
   * every token: 14 % of a tiny model's speed.
   */
  kilnBypasses(options: Readonly<Record<string, unknown>>): boolean {
    if (this.gate.on && unsafeFor(options) === undefined) return false;
    this.bypassed = true;
    return true;
  }

  /**
   * The turn ended having generated `tokens`. Those of a turn that went without the predictor, or
   * after it left it, count toward the gate's next probe here (the others were counted as they came,
   * in `pushTokens`).
   */
  endTurn(tokens: number): void {
    if (this.bypassed) this.gate.generated(Math.max(0, tokens - this.counted));
    this.bypassed = false;
    this.counted = 0;
  }

  /** Counts of the target sequence not yet given to the gate. */
  private account(): void {
    if (!this.target) return;
    const { validated, refuted } = this.target.tokenPredictions;
    // a cleared sequence keeps its counts; a new one would start over: never negative
    this.gate.record(Math.max(0, validated - this.seenValidated), Math.max(0, refuted - this.seenRefuted));
    this.seenValidated = validated;
    this.seenRefuted = refuted;
  }

  reset(params: Parameters<TokenPredictor["reset"]>[0]): Promise<void> | void {
    this.account();
    this.target = params.targetSequence;
    this.state = params.stateTokens.slice();
    this.evaluateOptions = params.evaluateOptions;
    this.allowed = unsafeFor(params.evaluateOptions as Readonly<Record<string, unknown>>) === undefined;
    this.inSync = false;
    if (!this.allowed || !this.gate.on) return;
    return this.sync();
  }

  private sync(): Promise<void> | void {
    this.inSync = true;
    // prompt lookup searches the sequence's tokens as they were when it was reset (the prompt, and what was generated before)
    if (this.inner instanceof InputLookupTokenPredictor) this.inner.updateInputTokens(this.state);
    return this.inner.reset({ targetSequence: this.target!, stateTokens: this.state.slice(), evaluateOptions: this.evaluateOptions });
  }

  pushTokens(tokens: Token[]): void {
    this.state.push(...tokens);
    this.gate.generated(tokens.length);
    this.counted += tokens.length;
    if (this.inSync) this.inner.pushTokens(tokens);
  }

  predictTokens(): Promise<Token[]> | Token[] {
    this.account();
    if (!this.allowed || !this.target) return [];
    if (!this.gate.on) {
      if (this.inSync) {
        this.inSync = false;
        void this.inner.stop();
      }
      return [];
    }
    if (this.inSync) return this.predicted(this.inner.predictTokens());
    const syncing = this.sync();
    return syncing ? syncing.then(() => this.predicted(this.inner.predictTokens())) : this.predicted(this.inner.predictTokens());
  }

  /** A draft's round that proposed nothing spent draft decodes for nothing: the gate counts it as a refuted prediction. */
  private predicted(tokens: Promise<Token[]> | Token[]): Promise<Token[]> | Token[] {
    if (!(this.inner instanceof DraftSequenceTokenPredictor)) return tokens;
    const count = (t: Token[]): Token[] => {
      if (t.length === 0) this.gate.record(0, 0, 1);
      return t;
    };
    return Array.isArray(tokens) ? count(tokens) : tokens.then(count);
  }

  override stop(untilPredictionsExhausted?: boolean): Promise<void> | void {
    this.account();
    return this.inner.stop(untilPredictionsExhausted);
  }

  override updateInputTokens(tokens: Token[]): void {
    if (!(this.inner instanceof InputLookupTokenPredictor)) this.inner.updateInputTokens(tokens);
  }

  override dispose(): Promise<void> | void {
    return this.inner.dispose();
  }

  /** The slot goes to another cache scope: a draft's sequence drops what it holds, as the target's does (no prefix of another account's kept). */
  async forget(): Promise<void> {
    this.inSync = false;
    if (this.inner instanceof DraftSequenceTokenPredictor) await this.inner.draftSequence.clearHistory();
  }
}

/** The predictor a slot of a pool speculating with `gate` gets: prompt lookup, or a draft model's sequence. */
export function slotPredictor(gate: SpeculationGate, draftSequence?: LlamaContextSequence): GatedTokenPredictor {
  const inner = draftSequence
    ? new DraftSequenceTokenPredictor(draftSequence, { minTokens: DRAFT_MIN_TOKENS, maxTokens: DRAFT_MAX_TOKENS, minConfidence: DRAFT_MIN_CONFIDENCE })
    : new InputLookupTokenPredictor({ patternLength: { min: 2 }, predictionLength: { max: LOOKUP_MAX_TOKENS } });
  return new GatedTokenPredictor(gate, inner);
}
