// POST /v1/completions through the SDK's client.completions.create: greedy text
// against the demo model's reference continuation, usage, finish reasons,
// streaming (with and without stream_options.include_usage), token-id prompts,
// several prompts with n > 1, logprobs, echo and stop strings.

import assert from 'node:assert/strict';
import { before, test } from 'node:test';

import {
  CASES, LOGPROB_TOLERANCE, MODEL, assertUsage, client, collect, detokenize,
} from './common.mjs';

const openai = client();
const A = CASES[0];  // 'And the LORD said unto Moses,' -> ' Behold, I will bring thee into the land of Egypt, …'
const B = CASES[1];  // 'The LORD is my shepherd;'
const MAX = 8;
let greedy;          // the non-streamed greedy completion of A (MAX tokens)
let greedyText;      // the reference's first MAX tokens, decoded

before(async () => {
  greedyText = await detokenize(A.output_token_ids.slice(0, MAX));
  assert.ok(A.output_text.startsWith(greedyText), `${greedyText} vs ${A.output_text}`);
});

test('non-streamed greedy completion: the reference text, usage, finish_reason "length"', async () => {
  greedy = await openai.completions.create({ model: MODEL, prompt: A.prompt, max_tokens: MAX,
                                             temperature: 0 });
  assert.equal(greedy.object, 'text_completion');
  assert.match(greedy.id, /^cmpl-/);
  assert.equal(greedy.model, MODEL);
  assert.ok(Number.isInteger(greedy.created) && greedy.created > 1.6e9, `created ${greedy.created}`);
  assert.equal(greedy.choices.length, 1);
  const [c] = greedy.choices;
  assert.equal(c.index, 0);
  assert.equal(c.text, greedyText);
  assert.equal(c.finish_reason, 'length');
  assert.ok(c.logprobs == null, `logprobs without asking: ${JSON.stringify(c.logprobs)}`);
  assertUsage(greedy.usage, { prompt: A.prompt_token_ids.length, completion: MAX });
});

test('a token-id prompt ([int]) and a list of them ([[int]]) complete like their text', async () => {
  const one = await openai.completions.create({ model: MODEL, prompt: A.prompt_token_ids,
                                               max_tokens: MAX, temperature: 0 });
  assert.equal(one.choices.length, 1);
  assert.equal(one.choices[0].text, greedyText);
  assertUsage(one.usage, { prompt: A.prompt_token_ids.length, completion: MAX });

  const two = await openai.completions.create({
    model: MODEL, prompt: [A.prompt_token_ids, B.prompt_token_ids], max_tokens: 4,
    temperature: 0 });
  assert.deepEqual(two.choices.map((c) => c.index), [0, 1]);
  assert.equal(two.choices[0].text, await detokenize(A.output_token_ids.slice(0, 4)));
  assert.equal(two.choices[1].text, await detokenize(B.output_token_ids.slice(0, 4)));
  assertUsage(two.usage, { prompt: A.prompt_token_ids.length + B.prompt_token_ids.length,
                           completion: 8 });
});

test('streamed completion with include_usage: same text, then a usage chunk with no choices', async () => {
  const stream = await openai.completions.create({
    model: MODEL, prompt: A.prompt, max_tokens: MAX, temperature: 0, stream: true,
    stream_options: { include_usage: true } });
  const chunks = await collect(stream);
  assert.ok(chunks.length >= 3, `${chunks.length} chunks`);
  const last = chunks.at(-1);
  const body = chunks.slice(0, -1);
  assert.deepEqual(last.choices, [], `last chunk ${JSON.stringify(last)}`);
  assertUsage(last.usage, { prompt: A.prompt_token_ids.length, completion: MAX });
  const ids = new Set(chunks.map((c) => c.id));
  assert.equal(ids.size, 1, `ids ${[...ids]}`);
  assert.match(last.id, /^cmpl-/);
  let text = '';
  let finishes = [];
  let textChunks = 0;
  for (const chunk of body) {
    assert.equal(chunk.object, 'text_completion');
    assert.equal(chunk.model, MODEL);
    assert.ok(chunk.usage == null, `usage before the last chunk: ${JSON.stringify(chunk)}`);
    assert.equal(chunk.choices.length, 1, JSON.stringify(chunk));
    const [c] = chunk.choices;
    assert.equal(c.index, 0);
    text += c.text;
    if (c.text) textChunks++;
    if (c.finish_reason != null) finishes.push(c.finish_reason);
  }
  assert.equal(text, greedyText);
  assert.ok(textChunks >= 2, `the text came in ${textChunks} chunk(s): not streamed`);
  assert.deepEqual(finishes, ['length']);
  assert.equal(body.at(-1).choices[0].finish_reason, 'length');
});

test('streamed completion without stream_options: no usage anywhere', async () => {
  const chunks = await collect(await openai.completions.create({
    model: MODEL, prompt: A.prompt, max_tokens: 4, temperature: 0, stream: true }));
  assert.ok(chunks.length >= 1);
  for (const chunk of chunks) {
    assert.ok(chunk.usage == null, `usage without include_usage: ${JSON.stringify(chunk)}`);
    assert.equal(chunk.choices.length, 1, JSON.stringify(chunk));
  }
  assert.equal(chunks.map((c) => c.choices[0].text).join(''),
               await detokenize(A.output_token_ids.slice(0, 4)));
  assert.equal(chunks.at(-1).choices[0].finish_reason, 'length');
});

test('n=2 with two prompts: four choices numbered prompt_index*n + j', async () => {
  const request = { model: MODEL, prompt: [A.prompt, B.prompt], n: 2, max_tokens: 4,
                    temperature: 1, seed: 7, ignore_eos: true };
  const plain = await openai.completions.create(request);
  assert.equal(plain.choices.length, 4, JSON.stringify(plain.choices));
  assert.deepEqual(plain.choices.map((c) => c.index).sort(), [0, 1, 2, 3]);
  for (const c of plain.choices) {
    assert.equal(c.finish_reason, 'length', JSON.stringify(c));
    assert.ok(c.text.length > 0, JSON.stringify(c));
  }
  // Prompt tokens count once per prompt, completion tokens once per choice.
  assertUsage(plain.usage, { prompt: A.prompt_token_ids.length + B.prompt_token_ids.length,
                             completion: 16 });

  // Echo puts each choice's prompt in front: choices 0, 1 belong to A, 2, 3 to B,
  // and the same seed samples the same continuations.
  const echoed = await openai.completions.create({ ...request, echo: true });
  const byIndex = (r) => [...r.choices].sort((x, y) => x.index - y.index);
  const prompts = [A.prompt, A.prompt, B.prompt, B.prompt];
  byIndex(echoed).forEach((c, i) => {
    assert.equal(c.text, prompts[i] + byIndex(plain)[i].text, `choice ${i}`);
  });
});

test('logprobs=2: one entry per completion token, matching the reference', async () => {
  const r = await openai.completions.create({ model: MODEL, prompt: A.prompt, max_tokens: MAX,
                                              temperature: 0, logprobs: 2 });
  const [c] = r.choices;
  assert.equal(c.text, greedyText);
  assertUsage(r.usage, { prompt: A.prompt_token_ids.length, completion: MAX });
  const lp = c.logprobs;
  assert.ok(lp, 'no logprobs');
  for (const key of ['tokens', 'token_logprobs', 'top_logprobs', 'text_offset']) {
    assert.ok(Array.isArray(lp[key]), `logprobs.${key}: ${JSON.stringify(lp)}`);
    assert.equal(lp[key].length, r.usage.completion_tokens, `logprobs.${key}`);
  }
  assert.equal(lp.tokens.join(''), c.text);
  assert.equal(lp.text_offset[0], 0);
  for (let i = 0; i < MAX; i++) {
    const token = lp.tokens[i];
    const logprob = lp.token_logprobs[i];
    assert.ok(Math.abs(logprob - A.logprobs[i]) <= LOGPROB_TOLERANCE,
              `token ${i}: logprob ${logprob}, reference ${A.logprobs[i]}`);
    const top = lp.top_logprobs[i];
    const entries = Object.entries(top);
    assert.ok(entries.length >= 1 && entries.length <= 2, `top_logprobs[${i}] ${JSON.stringify(top)}`);
    // Greedy: the chosen token is the most likely one.
    assert.ok(Object.hasOwn(top, token), `top_logprobs[${i}] lacks ${JSON.stringify(token)}`);
    assert.ok(Math.abs(top[token] - logprob) <= 1e-6, `top_logprobs[${i}][token] ${top[token]}`);
    for (const [, v] of entries) assert.ok(v <= logprob + 1e-6 && v <= 0, `top_logprobs[${i}] ${v}`);
    // The reference's top two ids are two distinct tokens: two entries, the second
    // with the reference's runner-up log-prob.
    assert.equal(entries.length, 2, `top_logprobs[${i}] ${JSON.stringify(top)}`);
    const second = entries.map(([, v]) => v).sort((x, y) => y - x)[1];
    assert.ok(Math.abs(second - A.top_logprobs[i][1][1]) <= LOGPROB_TOLERANCE,
              `top_logprobs[${i}] runner-up ${second}, reference ${A.top_logprobs[i][1][1]}`);
    if (i > 0) {
      assert.equal(lp.text_offset[i], lp.text_offset[i - 1] + lp.tokens[i - 1].length,
                   `text_offset ${JSON.stringify(lp.text_offset)}`);
      assert.ok(lp.text_offset[i] > lp.text_offset[i - 1], `text_offset ${lp.text_offset}`);
    }
  }
});

test('echo: the text is the prompt followed by the completion', async () => {
  const r = await openai.completions.create({ model: MODEL, prompt: A.prompt, max_tokens: MAX,
                                              temperature: 0, echo: true });
  assert.ok(r.choices[0].text.startsWith(A.prompt), r.choices[0].text);
  assert.equal(r.choices[0].text, A.prompt + greedyText);
  assertUsage(r.usage, { prompt: A.prompt_token_ids.length, completion: MAX });
});

test('stop strings end the text before them with finish_reason "stop"', async () => {
  const at = A.output_text.indexOf(' Egypt');
  assert.ok(at > 0);
  const r = await openai.completions.create({ model: MODEL, prompt: A.prompt, max_tokens: 16,
                                              temperature: 0, stop: ['Egypt', 'Pharaoh'] });
  const [c] = r.choices;
  assert.equal(c.text, A.output_text.slice(0, at + 1));  // ' Behold, … the land of '
  assert.equal(c.finish_reason, 'stop');
  assert.equal(c.stop_reason, 'Egypt');  // vLLM: the stop string that matched
  assert.ok(r.usage.completion_tokens < 16, JSON.stringify(r.usage));

  const kept = await openai.completions.create({ model: MODEL, prompt: A.prompt, max_tokens: 16,
                                                 temperature: 0, stop: 'Egypt',
                                                 include_stop_str_in_output: true });
  assert.equal(kept.choices[0].text, A.output_text.slice(0, at + ' Egypt'.length));
  assert.equal(kept.choices[0].finish_reason, 'stop');
});
