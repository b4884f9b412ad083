/**
 * The one secret scrubber (issue: no secret is stored): everything sessionlog logs, returns or
 * exports from provider errors, tool output and configuration echoes passes through
 * {@link scrubSecrets}. It replaces the secrets this process was configured with (API keys,
 * the gateway token: {@link registerSecret}) and values that look like provider keys.
 */

/** What a scrubbed secret is replaced by. */
export const SECRET_MARKER = '[redacted]';

/** Shortest configured value treated as a secret (a shorter one would match ordinary text). */
const MIN_SECRET_LENGTH = 8;

const secrets = new Set<string>();
let secretPattern: RegExp | undefined;

/** Values that look like provider keys and tokens, whoever configured them. */
const KEY_PATTERNS: readonly RegExp[] = [
  // OpenAI, DeepSeek and compatible: sk-…, sk-proj-…, sk-ant-… (Anthropic)
  /\bsk-(?:proj-|ant-|live-|test-)?[A-Za-z0-9_-]{16,}/g,
  // Bearer tokens in echoed headers.
  /\b(Bearer\s+)[A-Za-z0-9._~+/=-]{16,}/gi,
  // GitHub, Slack, AWS access key ids, Google API keys.
  /\bgh[pousr]_[A-Za-z0-9]{30,}/g,
  /\bxox[abprs]-[A-Za-z0-9-]{10,}/g,
  /\bAKIA[0-9A-Z]{16}\b/g,
  /\bAIza[0-9A-Za-z_-]{35}\b/g,
];

function escape(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/** Adds a configured secret (an API key, a token) to what {@link scrubSecrets} removes. */
export function registerSecret(value: string | undefined): void {
  if (value === undefined || value.length < MIN_SECRET_LENGTH || secrets.has(value)) return;
  secrets.add(value);
  // Longest first, so a secret that contains another is replaced whole.
  secretPattern = new RegExp(
    [...secrets]
      .sort((a, b) => b.length - a.length)
      .map(escape)
      .join('|'),
    'g',
  );
}

/** `text` with every configured secret and every key-looking value replaced by the marker. */
export function scrubSecrets(text: string): string {
  let out = secretPattern ? text.replace(secretPattern, SECRET_MARKER) : text;
  for (const pattern of KEY_PATTERNS)
    out = out.replace(pattern, (match, prefix: unknown) =>
      typeof prefix === 'string' && /^Bearer/i.test(prefix) ? `${prefix}${SECRET_MARKER}` : SECRET_MARKER,
    );
  return out;
}
