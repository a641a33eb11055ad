#!/usr/bin/env node
// Generates the tokenizer goldens ONCE with the reference implementations, run by the machine's
// Node.js (the pinned packages of scripts/fetch-assets.sh):
//   gpt2         gpt-3-encoder 1.1.4 (OpenAI's GPT-2 encoder ported to JavaScript)
//   gpt2_hf      Hugging Face tokenizers (Rust core, npm build @anush008/tokenizers 0.6.0): BPE from
//                vocab.json + merges.txt with the ByteLevel pre-tokenizer (GPT-2 configuration)
//   llama2       the same library, Llama-2's tokenizer.json with its added_tokens removed, so that
//                "<s>" in text is ordinary text (ZCode's default: specials are not parsed in data)
//   llama2_special  Llama-2's tokenizer.json as shipped (specials parsed: ZC_ENCODE_ALLOW_SPECIAL)
// Texts: a deterministic sample of Debian's fortunes (English, fortunes-de, fortunes-ru,
// fortunes-zh) and an adversarial set. JavaScript strings cannot hold invalid UTF-8, so those
// cases are not here; the C++ tests cover them by round trip (see plugins/tokenizer/README.md).
//
// Usage: scripts/fetch-assets.sh && node scripts/tokenizer-goldens.js
// Writes tests/tokenizer/goldens/goldens.jsonl.gz (one JSON object per line).
const fs = require('fs');
const path = require('path');
const zlib = require('zlib');
const ROOT = path.resolve(__dirname, '..');
const ASSETS = process.env.ZCODE_ASSETS_DIR || path.join(ROOT, 'assets');
const NM = path.join(ASSETS, 'npm', 'node_modules');
const need = (m) => require(path.join(NM, m));

const FORTUNES = '/usr/share/games/fortunes';
function fortunesOf(files) {
  const out = [];
  for (const f of files) {
    const text = fs.readFileSync(f, 'utf8');
    for (const piece of text.split(/^%$/m)) {
      const t = piece.replace(/^\n/, '');
      if (t.trim().length > 0) out.push(t);
    }
  }
  return out;
}
function listPlain(dir) {
  return fs.readdirSync(dir).filter((n) => !n.endsWith('.dat') && !n.endsWith('.u8'))
    .map((n) => path.join(dir, n)).filter((p) => fs.statSync(p).isFile()).sort();
}
function sample(items, n) {  // every k-th item: deterministic, spread over all files
  const step = Math.max(1, Math.floor(items.length / n));
  const out = [];
  for (let i = 0; i < items.length && out.length < n; i += step) out.push(items[i]);
  return out;
}

const zh = ['chinese', 'tang300', 'song100'].map((n) => path.join(FORTUNES, n));
const en = listPlain(FORTUNES).filter((p) => !zh.includes(p));
const cases = [];
for (const [lang, files, n] of [['en', en, 250], ['de', listPlain(path.join(FORTUNES, 'de')), 200],
  ['ru', listPlain(path.join(FORTUNES, 'ru')), 200], ['zh', zh, 200]]) {
  sample(fortunesOf(files), n).forEach((t, i) => cases.push({ id: `fortune-${lang}-${i}`, text: t }));
}

// Adversarial set.
let seed = 12345;
const rnd = () => { seed = (seed * 1103515245 + 12345) % 2147483648; return seed / 2147483648; };
const word = (len) => { let s = ''; for (let i = 0; i < len; i++) s += 'abcdefghijklmnopqrstuvwxyz'[Math.floor(rnd() * 26)]; return s; };
const adv = {
  'empty': '',
  'spaces-run': 'a' + ' '.repeat(17) + 'b' + ' '.repeat(3),
  'only-spaces': '     ',
  'tabs': '\tx\t\ty \t z\t',
  'crlf': 'line one\r\nline two\r\n\r\n  indented\r\n',
  'newlines': '\n\n\nA\n \n  \nB',
  'contractions-lower': "it's don't we're I've I'm we'll he'd 's 't 're 've 'm 'll 'd",
  'contractions-upper': "IT'S DON'T WE'RE I'VE I'M WE'LL HE'D 'S 'T 'RE 'VE 'M 'LL 'D",
  'contractions-mixed': "It'S dOn'T 'Re 'vE ''s '''t",
  'digits-letters': 'abc123def 4567 8x9y0z 3.14159 1,000,000 0x1F 2nd 21st H2O',
  'emoji': 'I ❤️ 🦀 and 🧑‍🚀 👩‍👩‍👧‍👦 🏳️‍🌈 👍🏽',
  'zwj': 'a\u200db\u200cc\u2060d',
  'combining': 'e\u0301 a\u0308 n\u0303 \u1e9b\u0323 q\u0307\u0323 \u0915\u093c',
  'nul': 'a\u0000b\u0000\u0000 c',
  'controls': '\u0001\u0002\u001b[31mred\u001b[0m\u007f\b',
  'unicode-spaces': 'a\u00a0b\u2003c\u3000d\u202fe\u2028f\u2029g\ufeffh\u0085i\u180ej',
  'special-looking-gpt2': 'Hello<|endoftext|>World <|endoftext|> <|endoftext|><|endoftext|>',
  'special-looking-llama': '<s>Hello</s> <s> </s><unk> <s',
  'special-looking-glm': '<pad><bos><eos><mask><expert_0><expert_7><image>',
  'punctuation': '!!! ??? ... --- ((())) [[x]] {y} "quoted" \'single\' `code` @#$%^&*',
  'commas': ',,,, ,, , a,b,,c ,,,,,,,,',
  'mixed-scripts': 'Hello Привет 你好 مرحبا שלום नमस्ते こんにちは 안녕하세요',
  'long-word-2k': word(2000),
  'long-word-100k': word(100000),
  'long-spaces': ' '.repeat(5000) + 'x',
  'url': 'https://example.com/path?query=1&b=2#frag user@example.org',
};
for (const [k, v] of Object.entries(adv)) cases.push({ id: `adv-${k}`, text: v });

(async () => {
  const g3 = need('gpt-3-encoder');
  const T = need('@anush008/tokenizers');
  const gpt2 = path.join(ASSETS, 'hf', 'gpt2');
  const hfGpt2 = new T.Tokenizer(await T.BPE.fromFile(path.join(gpt2, 'vocab.json'), path.join(gpt2, 'merges.txt'), {}));
  hfGpt2.setPreTokenizer(T.byteLevelPreTokenizer(false, true));
  const llamaJson = fs.readFileSync(path.join(ASSETS, 'hf', 'llama2', 'tokenizer.json'), 'utf8');
  const llamaSpecial = T.Tokenizer.fromString(llamaJson);
  const plain = JSON.parse(llamaJson);
  plain.added_tokens = [];
  const llamaPlain = T.Tokenizer.fromString(JSON.stringify(plain));
  const enc = async (tok, t) => Array.from((await tok.encode(t, null, { addSpecialTokens: false })).getIds());
  const lines = [];
  for (const c of cases) {
    const rec = { id: c.id, text: c.text };
    // gpt-3-encoder's bpe() is quadratic per word; the 100 KB word is left to the Rust reference.
    rec.gpt2 = c.text.length > 20000 && !/\s/.test(c.text) ? null : g3.encode(c.text);
    rec.gpt2_hf = await enc(hfGpt2, c.text);
    rec.llama2 = await enc(llamaPlain, c.text);
    rec.llama2_special = await enc(llamaSpecial, c.text);
    lines.push(JSON.stringify(rec));
  }
  const out = path.join(ROOT, 'tests', 'tokenizer', 'goldens', 'goldens.jsonl.gz');
  fs.mkdirSync(path.dirname(out), { recursive: true });
  fs.writeFileSync(out, zlib.gzipSync(lines.join('\n') + '\n', { level: 9 }));
  let differ = 0;
  for (const l of lines) { const r = JSON.parse(l); if (r.gpt2 && JSON.stringify(r.gpt2) !== JSON.stringify(r.gpt2_hf)) { differ++; console.log(`gpt-3-encoder and HF tokenizers differ on ${r.id}`); } }
  console.log(`wrote ${lines.length} cases to ${path.relative(ROOT, out)} (${fs.statSync(out).size} bytes); gpt2 references differ on ${differ}`);
})().catch((e) => { console.error(e); process.exit(1); });
