/**
 * Formats a byte count for logs and reports: the largest binary unit that keeps the number ≥ 1, with two decimals
 * (`formatBytes(1536) === '1.50 KiB'`, `formatBytes(512 * 2 ** 20) === '512.00 MiB'`); below 1 KiB the exact byte
 * count (`'512 B'`).
 */
export function formatBytes(bytes: number): string {
  const units = ['KiB', 'MiB', 'GiB', 'TiB'];
  if (Math.abs(bytes) < 1024) return `${bytes} B`;
  let value = bytes / 1024;
  let i = 0;
  while (Math.abs(value) >= 1024 && i < units.length - 1) {
    value /= 1024;
    i++;
  }
  return `${value.toFixed(2)} ${units[i]}`;
}
