// POST /v1/chat/completions through client.chat.completions.create: the demo
// model's chat template ("Question: …\nAnswer:"), usage against /tokenize,
// max_completion_tokens and max_tokens, text-part content, streaming,
// logprobs / top_logprobs, stop strings and seeded sampling.

import assert from 'node:assert/strict';
import { before, test } from 'node:test';

import { MODEL, assertUsage, client, collect, tokenize } from './common.mjs';

const openai = client();
const MESSAGES = [{ role: 'user', content: 'Who is the LORD?' }];
const MAX = 8;
let promptTokens;  // the rendered template's length, as /tokenize counts it
let greedy;        // non-streamed greedy reply, MAX tokens

function greedyRequest(extra = {}) {
  return { model: MODEL, messages: MESSAGES, temperature: 0, max_completion_tokens: MAX,
           ignore_eos: true, ...extra };
}

before(async () => {
  const t = await tokenize({ model: MODEL, messages: MESSAGES });
  assert.equal(t.count, t.tokens.length);
  promptTokens = t.count;
  assert.ok(promptTokens > 5, `the rendered chat prompt has ${promptTokens} tokens`);
});

test('non-streamed chat completion: an assistant message, usage, finish_reason "length"', async () => {
  greedy = await openai.chat.completions.create(greedyRequest());
  assert.equal(greedy.object, 'chat.completion');
  assert.match(greedy.id, /^chatcmpl-/);
  assert.equal(greedy.model, MODEL);
  assert.equal(greedy.choices.length, 1);
  const [c] = greedy.choices;
  assert.equal(c.index, 0);
  assert.equal(c.message.role, 'assistant');
  assert.equal(typeof c.message.content, 'string');
  assert.ok(c.message.content.trim().length > 0, JSON.stringify(c.message));
  assert.ok(!c.message.tool_calls?.length, JSON.stringify(c.message));
  assert.equal(c.finish_reason, 'length');
  assert.ok(c.logprobs == null, `logprobs without asking: ${JSON.stringify(c.logprobs)}`);
  assertUsage(greedy.usage, { prompt: promptTokens, completion: MAX });

  // Greedy is deterministic.
  const again = await openai.chat.completions.create(greedyRequest());
  assert.equal(again.choices[0].message.content, c.message.content);
});

test('max_tokens (deprecated) limits like max_completion_tokens; text parts read like a string', async () => {
  const legacy = await openai.chat.completions.create({
    model: MODEL, messages: MESSAGES, temperature: 0, max_tokens: 4, ignore_eos: true });
  assert.equal(legacy.usage.completion_tokens, 4);
  assert.equal(legacy.choices[0].finish_reason, 'length');
  assert.ok(greedy.choices[0].message.content.startsWith(legacy.choices[0].message.content),
            `${JSON.stringify(legacy.choices[0].message.content)} is not a prefix of ` +
            JSON.stringify(greedy.choices[0].message.content));

  const parts = await openai.chat.completions.create(greedyRequest({
    messages: [{ role: 'user', content: [{ type: 'text', text: MESSAGES[0].content }] }] }));
  assert.equal(parts.choices[0].message.content, greedy.choices[0].message.content);
  assertUsage(parts.usage, { prompt: promptTokens, completion: MAX });

  // A system message changes the prompt (the template puts it first).
  const system = await openai.chat.completions.create(greedyRequest({
    messages: [{ role: 'system', content: 'Thus saith the LORD.' }, ...MESSAGES] }));
  assert.ok(system.usage.prompt_tokens > promptTokens, JSON.stringify(system.usage));
});

test('streamed chat completion: role first, the same content, then usage', async () => {
  const chunks = await collect(await openai.chat.completions.create(greedyRequest({
    stream: true, stream_options: { include_usage: true } })));
  assert.ok(chunks.length >= 3, `${chunks.length} chunks`);
  const last = chunks.at(-1);
  assert.deepEqual(last.choices, [], `last chunk ${JSON.stringify(last)}`);
  assertUsage(last.usage, { prompt: promptTokens, completion: MAX });
  const body = chunks.slice(0, -1);
  assert.equal(body[0].choices[0].delta.role, 'assistant', JSON.stringify(body[0]));
  assert.equal(new Set(chunks.map((c) => c.id)).size, 1);
  let content = '';
  const finishes = [];
  let contentChunks = 0;
  for (const chunk of body) {
    assert.equal(chunk.object, 'chat.completion.chunk');
    assert.equal(chunk.model, MODEL);
    assert.ok(chunk.usage == null, `usage before the last chunk: ${JSON.stringify(chunk)}`);
    assert.equal(chunk.choices.length, 1, JSON.stringify(chunk));
    const [c] = chunk.choices;
    assert.equal(c.index, 0);
    if (c.delta.content) {
      content += c.delta.content;
      contentChunks++;
    }
    if (c.finish_reason != null) finishes.push(c.finish_reason);
  }
  assert.equal(content, greedy.choices[0].message.content);
  assert.ok(contentChunks >= 2, `the content came in ${contentChunks} chunk(s): not streamed`);
  assert.deepEqual(finishes, ['length']);
});

test('logprobs with top_logprobs=3: one entry per token, greedy choice on top', async () => {
  const r = await openai.chat.completions.create(greedyRequest({ logprobs: true, top_logprobs: 3 }));
  const [c] = r.choices;
  assert.equal(c.message.content, greedy.choices[0].message.content);
  const content = c.logprobs?.content;
  assert.ok(Array.isArray(content), `choices[0].logprobs ${JSON.stringify(c.logprobs)}`);
  assert.equal(content.length, r.usage.completion_tokens);
  assert.equal(content.map((e) => e.token).join(''), c.message.content);
  content.forEach((e, j) => {
    const where = `logprobs.content[${j}] ${JSON.stringify(e)}`;
    assert.equal(typeof e.token, 'string', where);
    assert.ok(typeof e.logprob === 'number' && e.logprob <= 0, where);
    assert.deepEqual(e.bytes, [...Buffer.from(e.token, 'utf8')], where);
    assert.equal(e.top_logprobs.length, 3, where);
    assert.equal(e.top_logprobs[0].token, e.token, where);
    assert.ok(Math.abs(e.top_logprobs[0].logprob - e.logprob) <= 1e-6, where);
    for (let k = 1; k < 3; k++) {
      assert.ok(e.top_logprobs[k].logprob <= e.top_logprobs[k - 1].logprob, where);
      assert.notEqual(e.top_logprobs[k].token, e.top_logprobs[0].token, where);
    }
    for (const t of e.top_logprobs) assert.deepEqual(t.bytes, [...Buffer.from(t.token, 'utf8')], where);
  });

  // logprobs: true without top_logprobs: entries with no alternatives.
  const bare = await openai.chat.completions.create(greedyRequest({ logprobs: true,
                                                                    max_completion_tokens: 2 }));
  assert.equal(bare.choices[0].logprobs.content.length, 2);
  for (const e of bare.choices[0].logprobs.content) assert.deepEqual(e.top_logprobs, []);
});

test('a stop string ends the reply before it with finish_reason "stop"', async () => {
  const long = await openai.chat.completions.create(greedyRequest({ max_completion_tokens: 16 }));
  const text = long.choices[0].message.content;
  const words = text.split(/\s+/).filter((w) => w.length > 0);
  const stop = words.slice(1).find((w) => text.indexOf(w) > 0);
  assert.ok(stop, `no word to stop on in ${JSON.stringify(text)}`);
  const cut = text.indexOf(stop);
  const r = await openai.chat.completions.create(greedyRequest({ max_completion_tokens: 16,
                                                                 stop: [stop] }));
  assert.equal(r.choices[0].message.content, text.slice(0, cut), `stop ${JSON.stringify(stop)}`);
  assert.equal(r.choices[0].finish_reason, 'stop');
  assert.ok(r.usage.completion_tokens < 16, JSON.stringify(r.usage));
});

test('seed: temperature 1 with the same seed gives the same reply', async () => {
  const sampled = (seed) => openai.chat.completions.create({
    model: MODEL, messages: MESSAGES, temperature: 1, seed, max_completion_tokens: 12,
    ignore_eos: true }).then((r) => r.choices[0].message.content);
  const first = await sampled(1234);
  const second = await sampled(1234);
  assert.equal(second, first);
  // Sampling does sample: other seeds, and greedy, give other replies.
  const others = [await sampled(1), await sampled(2), await sampled(3)];
  assert.ok(others.some((t) => t !== first), `seeds 1, 2, 3 and 1234 all gave ${JSON.stringify(first)}`);
  const greedy12 = (await openai.chat.completions.create(greedyRequest({
    max_completion_tokens: 12 }))).choices[0].message.content;
  assert.ok([first, ...others].some((t) => t !== greedy12), 'temperature 1 sampled the greedy reply every time');
});
