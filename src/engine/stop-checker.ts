import type { SamplingParams } from './sampling-params.js';
import { SequenceStatus, type Sequence } from './sequence.js';

/**
 * Decides, after a token was appended and detokenized, whether a sequence is finished, in vLLM's order: nothing
 * before minTokens; EOS (unless ignoreEos); a stop token id; a stop string (the output text is cut at its start,
 * or after it with includeStopStrInOutput); the model's maximum length; maxTokens. EOS and stop-token text is
 * removed from the output text. Sets the sequence's status (and stopReason).
 *
 * Mirrors vLLM's `StopChecker` (vllm/engine/output_processor/stop_checker.py).
 */
export class StopChecker {
  /** @param maxModelLen longest sequence, prompt + output, in tokens. */
  constructor(private readonly maxModelLen: number) {}

  /**
   * @param seq the sequence a token was just appended to.
   * @param newCharCount characters that token added to `seq.outputText`.
   */
  maybeStopSequence(seq: Sequence, newCharCount: number, params: SamplingParams): void {
    if (seq.getOutputLen() < params.minTokens) return;
    const last = seq.getLastTokenId();
    if (!params.ignoreEos && seq.eosTokenIds.includes(last)) {
      if (newCharCount > 0 && !params.includeStopStrInOutput) {
        seq.outputText = seq.outputText.slice(0, seq.outputText.length - newCharCount);
      }
      seq.status = SequenceStatus.FINISHED_STOPPED;
      return;
    }
    if (params.stopTokenIds.includes(last)) {
      if (newCharCount > 0 && !params.includeStopStrInOutput) {
        seq.outputText = seq.outputText.slice(0, seq.outputText.length - newCharCount);
      }
      seq.status = SequenceStatus.FINISHED_STOPPED;
      seq.stopReason = last;
      return;
    }
    const stopStr = StopChecker.checkStopStrings(seq, newCharCount, params);
    if (stopStr !== null) {
      seq.status = SequenceStatus.FINISHED_STOPPED;
      seq.stopReason = stopStr;
      return;
    }
    if (seq.getLen() > this.maxModelLen) {
      seq.status = SequenceStatus.FINISHED_LENGTH_CAPPED;
      return;
    }
    if (params.maxTokens !== null && seq.getOutputLen() >= params.maxTokens) {
      seq.status = SequenceStatus.FINISHED_LENGTH_CAPPED;
    }
  }

  /**
   * Looks for a stop string in the text the last token added (plus a stop string's length before it, where a stop
   * string split across tokens starts) and truncates the output text there. Returns the stop string found, or null.
   */
  static checkStopStrings(seq: Sequence, newCharCount: number, params: SamplingParams): string | null {
    if (newCharCount === 0 || params.stop.length === 0) return null;
    const text = seq.outputText;
    for (const stop of params.stop) {
      const from = Math.max(0, text.length - newCharCount - stop.length);
      let idx = text.indexOf(stop, from);
      if (idx < 0) continue;
      if (params.includeStopStrInOutput) {
        idx += stop.length;
        if (idx >= text.length) return stop;
      }
      seq.outputText = text.slice(0, idx);
      return stop;
    }
    return null;
  }
}
