/** A byte count as people write limits: `1 GB`, `256 MB`, or the bytes when neither divides it. */
export function formatBytes(n: number): string {
  return n % 1024 ** 3 === 0 ? `${n / 1024 ** 3} GB` : n % 1024 ** 2 === 0 ? `${n / 1024 ** 2} MB` : `${n} bytes`;
}

/** An amount of memory as people read it: GiB to one decimal, or MiB below one GiB. */
export function formatMemory(bytes: number): string {
  return bytes >= 2 ** 30 ? `${(bytes / 2 ** 30).toFixed(1)} GiB` : `${(bytes / 2 ** 20).toFixed(1)} MiB`;
}
