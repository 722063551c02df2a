// Shared by the *.test.mjs files: the OpenAI SDK (from FOLIO_NODE_MODULES, the
// locked install made by the ctest fixture openai_sdk_npm_ci), clients for the
// cluster openai_sdk_test.py started, plain-HTTP helpers for folio's non-OpenAI
// endpoints (/tokenize, /detokenize, /metrics, /health, /version) and the demo
// model's reference continuations (models/folio-demo/reference.json).

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';

function required(name) {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set (openai_sdk_test.py sets it)`);
  return value;
}

// ESM ignores NODE_PATH: resolve `openai` the way a module next to the
// node_modules folder would, and check that the locked install is the one found.
const nodeModules = path.resolve(required('FOLIO_NODE_MODULES'));
const requireFromInstall = createRequire(path.join(nodeModules, '..', 'resolve-from-here.cjs'));
const sdkEntry = requireFromInstall.resolve('openai');
if (!sdkEntry.startsWith(nodeModules + path.sep)) {
  throw new Error(`openai resolved to ${sdkEntry}, outside ${nodeModules}`);
}
const sdk = requireFromInstall('openai');
export const SDK_VERSION = JSON.parse(
  readFileSync(path.join(nodeModules, 'openai', 'package.json'), 'utf8')).version;
export const { OpenAI, APIError, BadRequestError, NotFoundError, AuthenticationError } = sdk;

export const BASE_URL = required('FOLIO_OPENAI_BASE_URL');        // http://127.0.0.1:H/v1
export const ROOT_URL = BASE_URL.replace(/\/v1\/?$/, '');          // http://127.0.0.1:H
export const API_KEY = required('FOLIO_API_KEY');
export const MODEL = 'folio-demo';
export const MAX_MODEL_LEN = 512;
export const BOS = 2046;
export const EOS = 2047;

const DEMO = required('FOLIO_DEMO_MODEL');
// Greedy continuations (64 tokens, ignore_eos) with per-token log-probs; the
// prompt ids include <|begin_of_text|>.
export const REFERENCE = JSON.parse(readFileSync(path.join(DEMO, 'reference.json'), 'utf8'));
export const CASES = REFERENCE.cases;
export const LOGPROB_TOLERANCE = REFERENCE.logprob_tolerance ?? 1e-3;

export function client(options = {}) {
  return new OpenAI({ baseURL: BASE_URL, apiKey: API_KEY, maxRetries: 0, timeout: 120_000,
                      ...options });
}

// A plain HTTP call; the API key unless `key` is given (null: no Authorization).
export async function http(method, urlPath, body, { key = API_KEY } = {}) {
  const headers = {};
  if (key !== null) headers.authorization = `Bearer ${key}`;
  if (body !== undefined) headers['content-type'] = 'application/json';
  const response = await fetch(ROOT_URL + urlPath, {
    method, headers, body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(60_000),
  });
  const text = await response.text();
  let json;
  try { json = JSON.parse(text); } catch { json = undefined; }
  return { status: response.status, headers: response.headers, text, json };
}

export async function tokenize(body) {
  const r = await http('POST', '/tokenize', body);
  assert.equal(r.status, 200, `POST /tokenize ${JSON.stringify(body)}: ${r.text}`);
  return r.json;
}

export async function detokenize(tokens) {
  const r = await http('POST', '/detokenize', { model: MODEL, tokens });
  assert.equal(r.status, 200, `POST /detokenize: ${r.text}`);
  assert.equal(typeof r.json.prompt, 'string', r.text);
  return r.json.prompt;
}

export async function metricsText() {
  const r = await http('GET', '/metrics', undefined, { key: null });
  assert.equal(r.status, 200, `GET /metrics: ${r.text}`);
  return r.text;
}

// Sum of the samples of metric `name` (every label set) whose labels include `labels`;
// undefined when there is no such sample.
export function metricValue(text, name, labels = {}) {
  let sum;
  for (const line of text.split('\n')) {
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([^}]*)\})?\s+(\S+)/.exec(line);
    if (!m || m[1] !== name) continue;
    const have = {};
    for (const l of (m[3] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) {
      have[l[1]] = l[2];
    }
    if (!Object.entries(labels).every(([k, v]) => have[k] === v)) continue;
    sum = (sum ?? 0) + Number(m[4]);
  }
  return sum;
}

// Polls condition() (truthy = done) with a deadline; returns its last value.
export async function waitFor(condition, what, timeoutMs = 30_000, intervalMs = 50) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await condition();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`${what} did not happen within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}

export async function collect(stream) {
  const chunks = [];
  for await (const chunk of stream) chunks.push(chunk);
  return chunks;
}

// Asserts that `promise` rejects with the SDK error class `cls`, HTTP `status`
// and, where given, the OpenAI error body's param / code / type.
export async function assertApiError(promise, cls, { status, param, code, type }) {
  await assert.rejects(promise, (e) => {
    assert.ok(e instanceof cls, `expected ${cls.name}, got ${e?.constructor?.name}: ${e}`);
    assert.equal(e.status, status, String(e));
    if (param !== undefined) assert.equal(e.param, param, `param of ${e}`);
    if (code !== undefined) assert.equal(e.code, code, `code of ${e}`);
    if (type !== undefined) assert.equal(e.type, type, `type of ${e}`);
    assert.equal(typeof e.error?.message, 'string', `error.message of ${JSON.stringify(e.error)}`);
    assert.ok(e.error.message.length > 0, 'an empty error message');
    return true;
  });
}

export function assertUsage(usage, { prompt, completion }) {
  assert.ok(usage, 'no usage');
  assert.equal(usage.prompt_tokens, prompt, `usage ${JSON.stringify(usage)}`);
  assert.equal(usage.completion_tokens, completion, `usage ${JSON.stringify(usage)}`);
  assert.equal(usage.total_tokens, prompt + completion, `usage ${JSON.stringify(usage)}`);
  const cached = usage.prompt_tokens_details?.cached_tokens;
  assert.ok(Number.isInteger(cached) && cached >= 0 && cached <= prompt,
            `usage.prompt_tokens_details.cached_tokens: ${JSON.stringify(usage)}`);
}
