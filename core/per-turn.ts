/**
 * A value computed at most once per turn of the event loop, for reads a burst of requests repeats:
 * the requests one turn handles came in together, so any of them may be answered from the state
 * when the first of them read it. The value is dropped at the turn's end (a `setImmediate`), so a
 * change made in one turn is read by every request of the next.
 */
export function oncePerTurn<T>(compute: () => T): () => T {
  let fresh = false;
  let value: T | undefined;
  const expire = () => {
    fresh = false;
    value = undefined;
  };
  return () => {
    if (!fresh) {
      value = compute();
      fresh = true;
      setImmediate(expire);
    }
    return value as T;
  };
}
