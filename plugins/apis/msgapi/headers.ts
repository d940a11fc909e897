// Request headers that belong to the messages API and its SDKs: the key (x-api-key), the API's
// version and betas (anthropic-*, the spec's msgapi-version) and the SDK's telemetry
// (x-stainless-*). They are not forwarded when a request is translated to another API: a
// chat-completions backend has no use for them, and one vendor's key must not reach another.
const MESSAGES_API_HEADER = /^(?:x-api-key$|msgapi-version$|anthropic-|x-stainless-)/;

/** For UpstreamRequest.omitClientHeader (names arrive lower-case). */
export const isMessagesApiHeader = (name: string): boolean => MESSAGES_API_HEADER.test(name);
