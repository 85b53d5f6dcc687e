/** One area of the catalogue: German must have exactly the keys English has. */
export function area<K extends string>(messages: { en: Record<K, string>; de: Record<K, string> }) {
  return messages;
}
