// GET /v1/models through client.models.list, and folio's plain endpoints by fetch:
// /tokenize + /detokenize round trips (text and chat messages), /health,
// /metrics and /version, with and without the API key.

import assert from 'node:assert/strict';
import { test } from 'node:test';

import {
  BOS, CASES, MAX_MODEL_LEN, MODEL, client, detokenize, http, metricsText, tokenize,
} from './common.mjs';

const openai = client();

test('models.list(): the one served model', async () => {
  const page = await openai.models.list();
  assert.equal(page.data.length, 1, JSON.stringify(page.data));
  const [m] = page.data;
  assert.equal(m.id, MODEL);
  assert.equal(m.object, 'model');
  assert.equal(m.max_model_len, MAX_MODEL_LEN);
  assert.equal(typeof m.owned_by, 'string');
  const seen = [];
  for await (const model of openai.models.list()) seen.push(model.id);
  assert.deepEqual(seen, [MODEL]);
});

test('/tokenize and /detokenize round-trip the reference prompts', async () => {
  for (const c of CASES.slice(0, 3)) {
    const t = await tokenize({ model: MODEL, prompt: c.prompt });
    assert.deepEqual(t.tokens, c.prompt_token_ids, c.prompt);  // <|begin_of_text|> first
    assert.equal(t.count, c.prompt_token_ids.length);
    assert.equal(t.max_model_len, MAX_MODEL_LEN);
    const plain = await tokenize({ model: MODEL, prompt: c.prompt, add_special_tokens: false });
    assert.deepEqual(plain.tokens, c.prompt_token_ids.slice(1), c.prompt);
    assert.equal(await detokenize(plain.tokens), c.prompt);
    assert.equal(await detokenize(c.output_token_ids), c.output_text);
  }
});

test('/tokenize renders chat messages with the chat template', async () => {
  const t = await tokenize({ model: MODEL, messages: [{ role: 'user', content: 'Who is the LORD?' }] });
  assert.equal(t.count, t.tokens.length);
  assert.equal(t.tokens[0], BOS);
  assert.notEqual(t.tokens[1], BOS, 'two <|begin_of_text|>: the template and the tokenizer both added one');
  assert.equal(await detokenize(t.tokens), '<|begin_of_text|>Question: Who is the LORD?\nAnswer:');
});

test('the API key guards everything but /health and /metrics', async () => {
  assert.equal((await http('GET', '/health', undefined, { key: null })).status, 200);
  const metrics = await metricsText();  // without a key
  assert.match(metrics, /^folio_requests_running(\{[^}]*\})? /m);
  assert.match(metrics, /^folio_http_requests_total\{[^}]*endpoint="[^"]*"[^}]*\} /m);
  assert.match(metrics, /^folio_http_requests_total\{[^}]*code="200"[^}]*\} /m);

  const version = await http('GET', '/version');
  assert.equal(version.status, 200, version.text);
  assert.equal(typeof version.json?.version, 'string', version.text);
  assert.ok(version.json.version.length > 0);

  for (const [method, path, body] of [
    ['GET', '/v1/models'], ['GET', '/version'], ['POST', '/tokenize', { prompt: 'Amen' }],
    ['POST', '/detokenize', { tokens: [258] }],
    ['POST', '/v1/chat/completions', { model: MODEL, messages: [{ role: 'user', content: 'Amen' }] }]]) {
    for (const key of [null, 'not-the-key']) {
      const r = await http(method, path, body, { key });
      assert.equal(r.status, 401, `${method} ${path} with key ${key}: ${r.status} ${r.text}`);
      assert.equal(typeof r.json?.error?.message, 'string', r.text);
    }
  }
});
