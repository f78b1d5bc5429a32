/**
 * Reads `general.architecture` from the first bytes of a GGUF file (fetched with a range request before the whole
 * file is downloaded), so an architecture pagellm does not run is refused before gigabytes arrive. The layout is
 * GGUF's (ggml/docs/gguf.md): magic, version (u32), tensor count (u64), metadata count (u64), then key/value pairs.
 */

const TYPE_SIZES: Record<number, number> = { 0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8 };
const STRING = 8;
const ARRAY = 9;

/**
 * The `general.architecture` string of a GGUF file whose first bytes are `prefix`.
 * @returns the architecture, or null when the prefix is not a GGUF file or ends before the key (the check is then
 *   left to the loader).
 */
export function ggufArchitectureFromPrefix(prefix: Uint8Array): string | null {
  const view = new DataView(prefix.buffer, prefix.byteOffset, prefix.byteLength);
  if (prefix.length < 24 || view.getUint32(0, true) !== 0x46554747) return null;
  const count = Number(view.getBigUint64(16, true));
  let at = 24;
  const need = (n: number): boolean => at + n <= prefix.length;
  const readString = (): string | null => {
    if (!need(8)) return null;
    const len = Number(view.getBigUint64(at, true));
    at += 8;
    if (!need(len)) return null;
    const s = new TextDecoder().decode(prefix.subarray(at, at + len));
    at += len;
    return s;
  };
  const skipValue = (type: number): boolean => {
    if (type === STRING) return readString() !== null;
    if (type === ARRAY) {
      if (!need(12)) return false;
      const inner = view.getUint32(at, true);
      const n = Number(view.getBigUint64(at + 4, true));
      at += 12;
      if (inner in TYPE_SIZES) {
        at += n * TYPE_SIZES[inner];
        return at <= prefix.length;
      }
      for (let i = 0; i < n; i++) if (!skipValue(inner)) return false;
      return true;
    }
    const size = TYPE_SIZES[type];
    if (size === undefined || !need(size)) return false;
    at += size;
    return true;
  };
  for (let i = 0; i < count; i++) {
    const key = readString();
    if (key === null || !need(4)) return null;
    const type = view.getUint32(at, true);
    at += 4;
    if (key === 'general.architecture' && type === STRING) return readString();
    if (!skipValue(type)) return null;
  }
  return null;
}
