// A client that aborts a stream (stream.controller.abort()) aborts its request:
// the scheduler stops generating for it and frees it (folio_requests_running
// back to 0, far fewer tokens generated than asked for; openai_sdk_test.py then
// checks that the scheduler exits 0, i.e. no KV block leaked).

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { CASES, MODEL, client, metricValue, metricsText, waitFor } from './common.mjs';

const openai = client();
const MAX_TOKENS = 400;

async function running() {
  const value = metricValue(await metricsText(), 'folio_requests_running');
  assert.ok(value !== undefined, 'no folio_requests_running in /metrics');
  return value;
}

async function generatedTokens() {
  const value = metricValue(await metricsText(), 'folio_generation_tokens_total');
  assert.ok(value !== undefined, 'no folio_generation_tokens_total in /metrics');
  return value;
}

test('aborting a stream frees its request', async () => {
  await waitFor(async () => (await running()) === 0, 'no request running before the test');
  const before = await generatedTokens();

  const stream = await openai.completions.create({
    model: MODEL, prompt: CASES[0].prompt, max_tokens: MAX_TOKENS, temperature: 0, stream: true,
    ignore_eos: true });
  const chunks = stream[Symbol.asyncIterator]();
  let text = '';
  for (let i = 0; i < 2; i++) {
    const { value, done } = await chunks.next();
    assert.ok(!done, `the stream ended after ${i} chunk(s)`);
    text += value.choices[0]?.text ?? '';
  }
  assert.ok(text.length > 0, 'two chunks without text');
  // Still generating: the request is running while the client holds the stream.
  assert.equal(await running(), 1, 'the long stream is not running any more before the abort');

  stream.controller.abort();
  // The SDK may still hand out chunks it had already read, then ends the
  // aborted stream quietly.
  let late = 0;
  while (!(await chunks.next()).done) late++;
  assert.ok(late < MAX_TOKENS - 2, `${late} chunks after the abort: the stream was not cut`);

  await waitFor(async () => (await running()) === 0, 'folio_requests_running back to 0 after the abort');
  const generated = (await generatedTokens()) - before;
  assert.ok(generated < MAX_TOKENS,
            `${generated} tokens generated: the aborted request ran to its max_tokens ${MAX_TOKENS}`);

  // The server serves on.
  const r = await openai.completions.create({ model: MODEL, prompt: CASES[0].prompt, max_tokens: 2,
                                              temperature: 0 });
  assert.equal(r.usage.completion_tokens, 2);
  await waitFor(async () => (await running()) === 0, 'folio_requests_running back to 0');
});
