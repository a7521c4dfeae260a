/**
 * herenow's input rules (docs/API.md, "Conventions"), for the places that
 * must know them before sending: the middleware batches many members into
 * one request, and one bad id would make the server refuse the whole batch.
 * The client methods leave the checking to the server, whose `code` is the
 * authority.
 *
 * @module
 */

/** Longest member id, in UTF-8 bytes. */
export const MAX_ID_BYTES = 256;
/** Longest space name, in bytes. */
export const MAX_SPACE_BYTES = 128;
/** Largest metadata object, as compact JSON, in bytes. */
export const MAX_META_BYTES = 1024;
/** Most items in one batch (heartbeats, leaves, look-ups). */
export const MAX_BATCH = 10_000;

const SPACE_NAME = /^[A-Za-z0-9._:@-]+$/;
// Unicode general category Cc, as Rust's `char::is_control`.
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;

/** Why `id` is not a member id, or `null` when it is one. */
export function memberIdProblem(id: unknown): string | null {
  if (typeof id !== "string") return `a member id must be a string, got ${typeof id}`;
  if (id === "") return "a member id must not be empty";
  const bytes = Buffer.byteLength(id, "utf8");
  if (bytes > MAX_ID_BYTES) return `a member id is ${bytes} bytes; the limit is ${MAX_ID_BYTES}`;
  if (CONTROL.test(id)) return "a member id must not hold control characters";
  return null;
}

/** Why `name` is not a space name, or `null` when it is one. */
export function spaceNameProblem(name: unknown): string | null {
  if (typeof name !== "string") return `a space name must be a string, got ${typeof name}`;
  if (name === "") return "a space name must not be empty";
  if (name.length > MAX_SPACE_BYTES) return `a space name is ${name.length} bytes; the limit is ${MAX_SPACE_BYTES}`;
  if (!SPACE_NAME.test(name)) return `space name ${JSON.stringify(name)} holds a character other than ASCII letters, digits and - _ . : @`;
  return null;
}

/** Why `meta` is not metadata the server takes, or `null` when it is fine. */
export function metaProblem(meta: unknown): string | null {
  if (typeof meta !== "object" || meta === null || Array.isArray(meta)) return "metadata must be a JSON object";
  let json: string;
  try {
    json = JSON.stringify(meta);
  } catch (e) {
    return `metadata cannot be written as JSON: ${(e as Error).message}`;
  }
  const bytes = Buffer.byteLength(json, "utf8");
  if (bytes > MAX_META_BYTES) return `metadata is ${bytes} bytes as JSON; the limit is ${MAX_META_BYTES}`;
  return null;
}
