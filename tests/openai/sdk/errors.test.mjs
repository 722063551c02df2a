// Errors as the SDK raises them: the HTTP status picks the error class, and the
// OpenAI error body ({"error": {message, type, param, code}}) fills its fields.

import assert from 'node:assert/strict';
import { test } from 'node:test';

import {
  AuthenticationError, BadRequestError, MODEL, NotFoundError, assertApiError, client, http,
  metricValue, metricsText,
} from './common.mjs';

const openai = client();
const PROMPT = 'In the beginning';
const MESSAGES = [{ role: 'user', content: 'Who is the LORD?' }];

function badCompletion(fields, param) {
  return assertApiError(
    openai.completions.create({ model: MODEL, prompt: PROMPT, max_tokens: 2, ...fields }),
    BadRequestError, { status: 400, param, type: 'invalid_request_error' });
}

function badChat(fields, param) {
  return assertApiError(
    openai.chat.completions.create({ model: MODEL, messages: MESSAGES, max_completion_tokens: 2,
                                     ...fields }),
    BadRequestError, { status: 400, param, type: 'invalid_request_error' });
}

test('completions: a bad sampling field is a BadRequestError naming it', async () => {
  await badCompletion({ temperature: -1 }, 'temperature');
  await badCompletion({ top_p: 2 }, 'top_p');
  await badCompletion({ n: 0 }, 'n');
  await badCompletion({ suffix: ' and the earth.' }, 'suffix');
});

test('chat: bad fields, non-text content parts, tools and response_format are 400s naming the field', async () => {
  await badChat({ temperature: -1 }, 'temperature');
  await badChat({ top_p: 2 }, 'top_p');
  await badChat({ n: 0 }, 'n');
  await badChat({
    messages: [{ role: 'user', content: [
      { type: 'text', text: 'What is this?' },
      { type: 'image_url', image_url: { url: 'data:image/png;base64,iVBORw0KGgo=' } }] }],
  }, 'messages[0].content[1].type');
  await badChat({
    tools: [{ type: 'function', function: { name: 'lookup_verse', description: 'finds a verse',
                                            parameters: { type: 'object', properties: {} } } }],
  }, 'tools');
  await badChat({ response_format: { type: 'json_object' } }, 'response_format');
  // tool_choice "none" and response_format "text" ask for nothing unsupported.
  const fine = await openai.chat.completions.create({
    model: MODEL, messages: MESSAGES, max_completion_tokens: 2, temperature: 0,
    tool_choice: 'none', response_format: { type: 'text' } });
  assert.equal(fine.choices.length, 1);
});

test('an unknown model is a NotFoundError with code "model_not_found"', async () => {
  const expected = { status: 404, param: 'model', code: 'model_not_found' };
  await assertApiError(
    openai.completions.create({ model: 'gpt-4o', prompt: PROMPT, max_tokens: 2 }),
    NotFoundError, expected);
  await assertApiError(
    openai.chat.completions.create({ model: 'gpt-4o', messages: MESSAGES, max_completion_tokens: 2 }),
    NotFoundError, expected);
});

test('a wrong API key is an AuthenticationError (401)', async () => {
  const intruder = client({ apiKey: 'not-the-key' });
  const expected = { status: 401, code: 'invalid_api_key' };
  await assertApiError(intruder.models.list(), AuthenticationError, expected);
  await assertApiError(
    intruder.completions.create({ model: MODEL, prompt: PROMPT, max_tokens: 2 }),
    AuthenticationError, expected);
  await assertApiError(
    intruder.chat.completions.create({ model: MODEL, messages: MESSAGES, max_completion_tokens: 2 }),
    AuthenticationError, expected);
  // No key at all (a plain request without Authorization).
  const bare = await http('POST', '/v1/completions', { model: MODEL, prompt: PROMPT, max_tokens: 2 },
                          { key: null });
  assert.equal(bare.status, 401, bare.text);
  assert.equal(typeof bare.json?.error?.message, 'string', bare.text);
});

test('/metrics counts the requests per endpoint and status code', async () => {
  const text = await metricsText();
  const count = (endpoint, code) =>
    metricValue(text, 'folio_http_requests_total', { endpoint, code }) ?? 0;
  assert.ok(count('/v1/completions', '400') >= 4, `400s on /v1/completions:\n${text}`);
  assert.ok(count('/v1/chat/completions', '400') >= 6, `400s on /v1/chat/completions`);
  assert.ok(count('/v1/chat/completions', '200') >= 1, `200s on /v1/chat/completions`);
  assert.ok(count('/v1/completions', '404') >= 1, `404s on /v1/completions`);
  assert.ok(count('/v1/completions', '401') >= 2, `401s on /v1/completions`);
});
