import { SequenceStatus, type SequenceGroupLike, type SequenceLike } from '../../src/core/index.js';

/** A minimal engine-side sequence for core tests: token ids, a mutable status, an optional cache salt. */
export class FakeSequence implements SequenceLike {
  readonly seqId: number;
  status: SequenceStatus;
  readonly tokens: number[];
  salt: string | null;
  numComputed: number | null = null;

  constructor(
    seqId: number,
    tokens: readonly number[],
    status: SequenceStatus = SequenceStatus.WAITING,
    salt: string | null = null,
  ) {
    this.seqId = seqId;
    this.tokens = tokens.slice();
    this.status = status;
    this.salt = salt;
  }

  getTokenIds(): readonly number[] {
    return this.tokens;
  }

  getLen(): number {
    return this.tokens.length;
  }

  extraHash(): string | null {
    return this.salt;
  }

  /** A copy with a new id and the same tokens and status (what the engine does for n > 1 / beam search). */
  clone(seqId: number): FakeSequence {
    const s = new FakeSequence(seqId, this.tokens, this.status, this.salt);
    return s;
  }
}

/** A group over fake sequences; getSeqs filters by status. */
export class FakeSequenceGroup implements SequenceGroupLike {
  readonly requestId: string;
  readonly seqs: FakeSequence[];

  constructor(requestId: string, seqs: FakeSequence[]) {
    this.requestId = requestId;
    this.seqs = seqs;
  }

  getSeqs(status?: SequenceStatus): readonly FakeSequence[] {
    return status === undefined ? this.seqs : this.seqs.filter((s) => s.status === status);
  }

  setStatus(status: SequenceStatus): void {
    for (const s of this.seqs) s.status = status;
  }
}

/** Tokens [start, start + n). */
export function range(n: number, start = 0): number[] {
  return Array.from({ length: n }, (_, i) => start + i);
}

/** A group of one waiting sequence. */
export function singleSeqGroup(
  seqId: number,
  tokens: readonly number[],
  salt: string | null = null,
): FakeSequenceGroup {
  return new FakeSequenceGroup(`req-${seqId}`, [new FakeSequence(seqId, tokens, SequenceStatus.WAITING, salt)]);
}
