/** One sample of the Prometheus text exposition format: `name{label="value",...} value`. */
export interface PrometheusSample {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly value: number;
}

/** Malformed exposition text (the message gives the line). */
export class PrometheusParseError extends Error {
  override readonly name = 'PrometheusParseError';
}

function parseValue(text: string, line: string): number {
  const lower = text.toLowerCase();
  if (lower === '+inf' || lower === 'inf') return Infinity;
  if (lower === '-inf') return -Infinity;
  if (lower === 'nan') return NaN; // prom-client writes Nan
  const v = Number(text);
  if (text === '' || Number.isNaN(v)) throw new PrometheusParseError(`bad sample value "${text}" in line: ${line}`);
  return v;
}

/**
 * Parses Prometheus text format 0.0.4 (what `GET /metrics` of pagellm, vLLM and prom-client return) into samples.
 * Comment and blank lines are skipped; NaN and ±Inf are read in any letter case (prom-client writes `Nan`); label values may hold escaped `\\`, `\"` and `\n`; a trailing timestamp
 * is ignored.
 * @throws PrometheusParseError for a line that is not a sample.
 */
export function parsePrometheusText(text: string): PrometheusSample[] {
  const out: PrometheusSample[] = [];
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)/.exec(line);
    if (m === null) throw new PrometheusParseError(`not a metric sample: ${line}`);
    const name = m[1];
    let i = name.length;
    const labels: Record<string, string> = {};
    if (line[i] === '{') {
      i++;
      for (;;) {
        while (line[i] === ' ' || line[i] === ',') i++;
        if (line[i] === '}') {
          i++;
          break;
        }
        const lm = /^([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"/.exec(line.slice(i));
        if (lm === null) throw new PrometheusParseError(`bad label list in line: ${line}`);
        i += lm[0].length;
        let value = '';
        for (;;) {
          const c = line[i];
          if (c === undefined) throw new PrometheusParseError(`unterminated label value in line: ${line}`);
          i++;
          if (c === '"') break;
          if (c === '\\') {
            const e = line[i++];
            value += e === 'n' ? '\n' : e;
          } else {
            value += c;
          }
        }
        labels[lm[1]] = value;
      }
    }
    const rest = line.slice(i).trim().split(/\s+/);
    out.push({ name, labels, value: parseValue(rest[0] ?? '', line) });
  }
  return out;
}

/** The sum of every sample named `name` (over all label sets), or undefined when there is none. */
export function sumSamples(samples: readonly PrometheusSample[], name: string): number | undefined {
  let found = false;
  let sum = 0;
  for (const s of samples) {
    if (s.name === name) {
      found = true;
      sum += s.value;
    }
  }
  return found ? sum : undefined;
}
