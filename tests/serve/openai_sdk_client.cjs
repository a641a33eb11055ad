// OpenAI's Node.js SDK (npm `openai`, pinned in scripts/fetch-assets.sh) as a
// client of `zcode-host serve`: completions, chat, and both streamed. Prints
// one JSON object with what it received; test_serve.py checks it against
// `zcode-host generate`. Usage: node openai_sdk_client.cjs URL API_KEY MODEL
const OpenAI = require('openai');

async function main() {
  const [url, apiKey, model] = process.argv.slice(2);
  const client = new OpenAI({ baseURL: url + '/v1', apiKey, maxRetries: 0 });
  const out = {};
  out.models = (await client.models.list()).data.map((m) => m.id);
  const c = await client.completions.create({ model, prompt: 'alpha beta', max_tokens: 24, temperature: 0 });
  out.completion = c.choices[0].text;
  out.completion_finish = c.choices[0].finish_reason;
  let streamed = '';
  const s = await client.completions.create({ model, prompt: 'alpha beta', max_tokens: 24, temperature: 0, stream: true });
  for await (const chunk of s) streamed += chunk.choices[0].text;
  out.completion_streamed = streamed;
  const messages = [{ role: 'system', content: 'the sky' }, { role: 'user', content: 'alpha beta' }];
  const chat = await client.chat.completions.create({ model, messages, max_tokens: 20, temperature: 0 });
  out.chat = chat.choices[0].message.content;
  out.chat_role = chat.choices[0].message.role;
  let chatStreamed = '';
  const cs = await client.chat.completions.create({ model, messages, max_tokens: 20, temperature: 0, stream: true });
  for await (const chunk of cs) chatStreamed += chunk.choices[0]?.delta?.content ?? '';
  out.chat_streamed = chatStreamed;
  try {
    await client.completions.create({ model: 'nope', prompt: 'x' });
    out.error = 'none';
  } catch (e) {
    out.error_status = e.status;
    out.error_code = e.code;
  }
  process.stdout.write(JSON.stringify(out) + '\n');
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
