// Reading parsed JSON and reply heads: the small shapes every step that looks into a body or a
// backend's head shares, defined once.

/** A parsed JSON object: not null, not an array. */
export type JsonObject = Record<string, unknown>;

export const isObject = (v: unknown): v is JsonObject => typeof v === 'object' && v !== null && !Array.isArray(v);

/** A backend's reply headers as undici hands them: lower-case names, repeated ones as arrays. */
export type ReplyHeaders = Record<string, string | string[] | undefined>;
