/**
 * Sizes as people write them in schedules.yaml: `4MiB`, `512KiB`, `1GiB`, `100KB`, `0`. A unit is
 * required (except for 0): a bare `4` could be bytes or megabytes. KB/MB/GB are read as powers of
 * 1000 and KiB/MiB/GiB as powers of 1024, as their names say; `B` is bytes.
 */
const UNIT_BYTES: Record<string, number> = {
  B: 1,
  KB: 1_000,
  MB: 1_000_000,
  GB: 1_000_000_000,
  KiB: 1024,
  MiB: 1024 ** 2,
  GiB: 1024 ** 3,
};
const SIZE = /^(\d+(?:\.\d+)?)\s*(B|KB|MB|GB|KiB|MiB|GiB)$/;

/** Bytes, or null when `text` is not a size. */
export function parseSize(text: string | number): number | null {
  if (text === 0 || text === '0') return 0;
  if (typeof text !== 'string') return null;
  const match = SIZE.exec(text.trim());
  if (!match) return null;
  return Math.round(Number(match[1]) * UNIT_BYTES[match[2]!]!);
}

export const SIZE_HINT = 'write a number with a unit: 512KiB, 4MiB, 1GiB (or 0 for none)';

/** `4194304` → `4MiB`, `1536` → `1.5KiB`: for messages and `baton logs`' gap notes. */
export function formatSize(bytes: number): string {
  const units: [string, number][] = [
    ['GiB', 1024 ** 3],
    ['MiB', 1024 ** 2],
    ['KiB', 1024],
  ];
  for (const [unit, size] of units) {
    if (bytes >= size) return `${Number((bytes / size).toFixed(1))}${unit}`;
  }
  return `${bytes}B`;
}
