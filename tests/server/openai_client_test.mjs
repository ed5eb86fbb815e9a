// The official `openai` npm client against `goose serve`: completions and chat, streamed and
// not, greedy and seeded sampling, each text equal to what `goose generate` prints; errors come
// back as the SDK's typed errors; a few concurrent clients. Run by openai_client_test.sh, which
// installs the package and starts the server.
// Usage: node openai_client_test.mjs PORT GOOSE_BINARY MODEL
import { execFileSync } from 'node:child_process';
import assert from 'node:assert/strict';
import OpenAI from 'openai';

const [port, goose, model] = process.argv.slice(2);
const client = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: 'unused', maxRetries: 0 });

// What `goose generate` prints for the prompt (its --json "text").
function generate(prompt, n, sampling = {}) {
  const args = ['generate', '-m', model, '-p', prompt, '-n', String(n), '--json', '-t', '1'];
  if (sampling.temperature !== undefined) args.push('--temp', String(sampling.temperature));
  if (sampling.top_p !== undefined) args.push('--top-p', String(sampling.top_p));
  if (sampling.top_k !== undefined) args.push('--top-k', String(sampling.top_k));
  if (sampling.seed !== undefined) args.push('--seed', String(sampling.seed));
  return JSON.parse(execFileSync(goose, args, { encoding: 'utf8' })).text;
}

let checks = 0;
function same(got, want, what) {
  assert.equal(got, want, `${what}: got ${JSON.stringify(got)}, want ${JSON.stringify(want)}`);
  ++checks;
}

async function completion(params) {
  const r = await client.completions.create(params);
  assert.equal(r.object, 'text_completion');
  assert.ok(r.usage && r.usage.completion_tokens > 0, 'usage');
  assert.ok(r.goose && r.goose.forward_passes > 0, 'goose statistics');
  return r.choices[0].text;
}

async function completionStream(params) {
  const stream = await client.completions.create({ ...params, stream: true,
                                                   stream_options: { include_usage: true } });
  let text = '';
  let usage = null;
  for await (const chunk of stream) {
    if (chunk.choices.length > 0) text += chunk.choices[0].text;
    if (chunk.usage) usage = chunk.usage;
  }
  assert.ok(usage && usage.completion_tokens > 0, 'usage in the last chunk');
  return text;
}

async function chat(params) {
  const r = await client.chat.completions.create(params);
  assert.equal(r.object, 'chat.completion');
  assert.equal(r.choices[0].message.role, 'assistant');
  return r.choices[0].message.content;
}

async function chatStream(params) {
  const stream = await client.chat.completions.create({ ...params, stream: true });
  let text = '';
  let role = null;
  for await (const chunk of stream) {
    const d = chunk.choices[0]?.delta ?? {};
    if (d.role) role = d.role;
    if (d.content) text += d.content;
  }
  assert.equal(role, 'assistant');
  return text;
}

const models = await client.models.list();
assert.equal(models.data.length, 1);
assert.ok(models.data[0].id.endsWith('.gguf'));

const prompt = 'Once upon a time';
for (const spec of ['goose', 'pld', 'none']) {
  const params = { model: 'goose', prompt, max_tokens: 48, goose: { spec } };
  const want = generate(prompt, 48);
  same(await completion(params), want, `completion (${spec})`);
  same(await completionStream(params), want, `streamed completion (${spec})`);
}

const sampling = { temperature: 0.8, top_p: 0.9, top_k: 40, seed: 7 };
{
  const want = generate(prompt, 40, sampling);
  const params = { model: 'goose', prompt, max_tokens: 40, ...sampling };
  same(await completion(params), want, 'sampled completion');
  same(await completionStream(params), want, 'sampled streamed completion');
}

// --chat-template chatml: the tiny model continues the rendered prompt.
{
  const messages = [{ role: 'system', content: 'You tell short stories.' },
                    { role: 'user', content: 'A story about a cat.' }];
  const rendered = '<|im_start|>system\nYou tell short stories.<|im_end|>\n' +
                   '<|im_start|>user\nA story about a cat.<|im_end|>\n<|im_start|>assistant\n';
  const want = generate(rendered, 40);
  same(await chat({ model: 'goose', messages, max_tokens: 40 }), want, 'chat');
  same(await chatStream({ model: 'goose', messages, max_tokens: 40 }), want, 'streamed chat');
  const wantSampled = generate(rendered, 40, sampling);
  same(await chat({ model: 'goose', messages, max_tokens: 40, ...sampling }), wantSampled,
       'sampled chat');
  same(await chatStream({ model: 'goose', messages, max_completion_tokens: 40, ...sampling }),
       wantSampled, 'sampled streamed chat');
}

// Predicted Outputs: the SDK sends `prediction` (chat and completions) and reads the counts of
// the prediction's tokens the answer reproduced and did not; the text never changes.
{
  const messages = [{ role: 'user', content: 'A story about a dog.' }];
  const rendered = '<|im_start|>user\nA story about a dog.<|im_end|>\n<|im_start|>assistant\n';
  const want = generate(rendered, 48);
  const edited = want.replace(/ the /, ' a ');
  for (const prediction of [want, edited]) {
    const r = await client.chat.completions.create({
      model: 'goose', messages, max_tokens: 48,
      prediction: { type: 'content', content: prediction } });
    same(r.choices[0].message.content, want, 'chat with a prediction');
    const d = r.usage.completion_tokens_details;
    assert.ok(d && d.accepted_prediction_tokens > 30, `accepted: ${JSON.stringify(r.usage)}`);
    assert.ok(d.rejected_prediction_tokens >= 0, `rejected: ${JSON.stringify(r.usage)}`);
  }
  const stream = await client.chat.completions.create({
    model: 'goose', messages, max_tokens: 48, stream: true,
    stream_options: { include_usage: true },
    prediction: { type: 'content', content: [{ type: 'text', text: edited }] } });
  let text = '';
  let usage = null;
  for await (const chunk of stream) {
    text += chunk.choices[0]?.delta?.content ?? '';
    if (chunk.usage) usage = chunk.usage;
  }
  same(text, want, 'streamed chat with a prediction in parts');
  assert.ok(usage.completion_tokens_details.accepted_prediction_tokens > 30, JSON.stringify(usage));
  const c = await client.completions.create({
    model: 'goose', prompt, max_tokens: 24, prediction: { type: 'content', content: 'xyz' } });
  assert.ok(c.usage.completion_tokens_details.rejected_prediction_tokens > 0, JSON.stringify(c.usage));
  const plain = await client.completions.create({ model: 'goose', prompt, max_tokens: 8 });
  assert.equal(plain.usage.completion_tokens_details, undefined, 'no details without a prediction');
  await assert.rejects(client.chat.completions.create({
    model: 'goose', messages, prediction: { type: 'content', content: 7 } }), (e) => {
    assert.equal(e.status, 400);
    assert.match(e.message, /prediction.content must be a string/);
    return true;
  });
}

// Errors arrive as the SDK's typed errors, with goose's message.
await assert.rejects(client.completions.create({ model: 'goose', prompt, n: 2 }), (e) => {
  assert.ok(e instanceof OpenAI.BadRequestError, String(e));
  assert.match(e.message, /'n' must be 1/);
  return true;
});
await assert.rejects(client.chat.completions.create({ model: 'goose', messages: [] }), (e) => {
  assert.equal(e.status, 400);
  assert.match(e.message, /'messages' is empty/);
  return true;
});
++checks;

// A few concurrent clients, mixed streaming.
{
  const prompts = ['Once upon a time', 'The little dog', 'Lily and Tom went'];
  const wants = prompts.map((p) => generate(p, 32));
  const jobs = [];
  for (let i = 0; i < 12; ++i) {
    const k = i % prompts.length;
    const params = { model: 'goose', prompt: prompts[k], max_tokens: 32 };
    jobs.push((i % 2 ? completionStream(params) : completion(params)).then((t) => [t, wants[k]]));
  }
  for (const [got, want] of await Promise.all(jobs)) same(got, want, 'concurrent completion');
}

console.log(`openai client test: ${checks} checks passed`);
