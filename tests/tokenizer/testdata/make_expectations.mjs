// Writes <variant>/expected.json for the SentencePiece-style tokenizer fixtures.
//
// Run by tools/make_spm_tokenizer_fixture.py (see its docstring), which copies this
// file into its scratch folder (default /tmp/spm) so that the imports resolve to
// the npm packages installed there:
//
//   node /tmp/spm/make_expectations.mjs /tmp/spm/cases.json tests/tokenizer/testdata
//
// The reference is Hugging Face's `tokenizers` library itself (the npm package
// `tokenizers`, its Node binding of the Rust crate): encode(text, no special
// tokens added) and decode(ids, skip_special_tokens). @huggingface/transformers
// (transformers.js, a JS re-implementation) runs the same cases as a cross-check;
// its disagreements are listed under "transformers_js_differs" and are not the
// expectation. Each tokenizer.json is also loaded and saved by `tokenizers` to
// check that the library reads every field as written.

import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const { Tokenizer } = require('tokenizers');
const { PreTrainedTokenizer, env } = await import('@huggingface/transformers');
const rustVersion = require('tokenizers/package.json').version;
const tjsVersion = env.version;

const [casesPath, testdata] = process.argv.slice(2);
if (!casesPath || !testdata) {
  console.error('usage: node make_expectations.mjs CASES.json TESTDATA_DIR');
  process.exit(2);
}
const cases = JSON.parse(fs.readFileSync(casesPath, 'utf8'));

const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);

// tokenizers saves merges as [left, right] pairs; compare files in that form.
function canonical(json) {
  const c = structuredClone(json);
  c.model.merges = c.model.merges.map((m) => (typeof m === 'string' ? m.split(' ') : m));
  return c;
}

function diffPaths(a, b, at = '') {
  if (same(a, b)) return [];
  if (a && b && typeof a === 'object' && typeof b === 'object' && !Array.isArray(a)) {
    const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
    return [...keys].flatMap((k) => diffPaths(a[k], b[k], `${at}.${k}`));
  }
  return [`${at}: wrote ${JSON.stringify(a)?.slice(0, 200)}, tokenizers saved ${JSON.stringify(b)?.slice(0, 200)}`];
}

function format(obj) {
  const keys = Object.keys(obj);
  const lines = ['{'];
  keys.forEach((k, n) => {
    const v = obj[k];
    const comma = n + 1 < keys.length ? ',' : '';
    if (Array.isArray(v) && v.length && typeof v[0] === 'object') {
      lines.push(`  ${JSON.stringify(k)}: [`);
      v.forEach((e, m) => lines.push(`    ${JSON.stringify(e)}${m + 1 < v.length ? ',' : ''}`));
      lines.push(`  ]${comma}`);
    } else {
      lines.push(`  ${JSON.stringify(k)}: ${JSON.stringify(v)}${comma}`);
    }
  });
  lines.push('}');
  return lines.join('\n') + '\n';
}

for (const variant of cases.variants) {
  const dir = path.join(testdata, variant);
  const file = path.join(dir, 'tokenizer.json');
  const json = JSON.parse(fs.readFileSync(file, 'utf8'));
  const config = JSON.parse(fs.readFileSync(path.join(dir, 'tokenizer_config.json'), 'utf8'));

  const rust = Tokenizer.fromFile(file);
  const saved = path.join(path.dirname(path.resolve(casesPath)), `roundtrip_${variant}.json`);
  rust.save(saved, false);
  const roundTrip = diffPaths(canonical(json), JSON.parse(fs.readFileSync(saved, 'utf8')));
  for (const d of roundTrip) console.log(`${variant}: round trip differs at ${d}`);

  // The base class, not AutoTokenizer's LlamaTokenizer: that one replaces the
  // file's normalizer / pre-tokenizer when legacy is false.
  const tjs = new PreTrainedTokenizer(json, config);

  const encode = [];
  const decode = [];
  const differs = [];
  const seen = new Set();

  async function addDecode(ids, name) {
    for (const skip of [false, true]) {
      const key = JSON.stringify([ids, skip]);
      if (seen.has(key)) continue;
      seen.add(key);
      const text = await rust.decode(ids, skip);
      const entry = name === undefined ? { ids, skip_special_tokens: skip, text }
                                       : { name, ids, skip_special_tokens: skip, text };
      decode.push(entry);
      // (transformers.js throws on an empty list)
      const t = ids.length === 0 ? ''
        : tjs.decode(ids, { skip_special_tokens: skip, clean_up_tokenization_spaces: false });
      if (t !== text) differs.push({ decode: ids, skip_special_tokens: skip, tokenizers: text, transformers_js: t });
    }
  }

  for (const text of cases.encode) {
    const enc = await rust.encode(text, null, { addSpecialTokens: false });
    const ids = enc.getIds();
    encode.push({ text, ids, tokens: enc.getTokens() });
    const t = tjs.encode(text, { add_special_tokens: false });
    if (!same(t, ids)) differs.push({ encode: text, tokenizers: ids, transformers_js: t });
  }
  for (const e of encode) await addDecode(e.ids);
  for (const d of cases.decode) await addDecode(d.ids, d.name);

  const out = {
    reference: `tokenizers ${rustVersion} (npm package "tokenizers", the Rust library's Node binding)`,
    cross_check: `@huggingface/transformers ${tjsVersion} (PreTrainedTokenizer)`,
    encode_call: 'encode(text, add_special_tokens=false)',
    decode_call: 'decode(ids, skip_special_tokens)',
    encode,
    decode,
    transformers_js_differs: differs,
  };
  fs.writeFileSync(path.join(dir, 'expected.json'), format(out));
  console.log(`${variant}: ${encode.length} encodes, ${decode.length} decodes, ` +
              `transformers.js differs on ${differs.length}, round trip ${roundTrip.length ? 'DIFFERS' : 'identical'}`);
}
