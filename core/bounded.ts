/**
 * Maps that remember at most so many entries: a key set past the bound forgets the oldest one (the
 * first set, as a Map keeps its order). For what a stranger can make many of (accounts, tokens,
 * node ids), so that no input grows a process's memory without end.
 */

/** Sets `key` in `map` to `value`, forgetting the oldest entry once there are more than `most`. */
export function rememberAtMost<K, V>(map: Map<K, V>, key: K, value: V, most: number): void {
  map.set(key, value);
  if (map.size > most) map.delete(map.keys().next().value!);
}
