// Load client for load_test.sh: CLIENTS concurrent clients, each sending REQUESTS completions
// one after another (alternately streamed; half greedy, half sampled with a seed), every text
// compared with `goose generate`'s for the same prompt and parameters.
// Usage: node load_test.mjs PORT GOOSE MODEL CLIENTS REQUESTS MAX_TOKENS PROMPTS.jsonl
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

const [port, goose, model, nClients, nRequests, maxTokens, promptFile] = process.argv.slice(2);
const clients = Number(nClients), requests = Number(nRequests), n = Number(maxTokens);
const url = `http://127.0.0.1:${port}/v1/completions`;

// The first 24 words of the first 8 stories.
const prompts = readFileSync(promptFile, 'utf8').split('\n').filter((l) => l).slice(0, 8)
  .map((l) => JSON.parse(l).text.split(' ').slice(0, 24).join(' '));
const samplings = [{}, { temperature: 0.8, top_p: 0.95, top_k: 40, seed: 11 }];

function generate(prompt, sampling) {
  const args = ['generate', '-m', model, '-p', prompt, '-n', String(n), '--json', '-t', '1'];
  if (sampling.temperature !== undefined) {
    args.push('--temp', String(sampling.temperature), '--top-p', String(sampling.top_p),
              '--top-k', String(sampling.top_k), '--seed', String(sampling.seed));
  }
  return JSON.parse(execFileSync(goose, args, { encoding: 'utf8' })).text;
}
const want = prompts.map((p) => samplings.map((s) => generate(p, s)));

async function request(k, s, stream) {
  const body = { prompt: prompts[k], max_tokens: n, stream, ...samplings[s] };
  const t0 = performance.now();
  const res = await fetch(url, { method: 'POST', headers: { 'Content-Type': 'application/json' },
                                 body: JSON.stringify(body) });
  if (res.status !== 200) return { ok: false, why: `HTTP ${res.status}: ${await res.text()}` };
  let text = '', tokens = 0, first = null;
  if (!stream) {
    const j = await res.json();
    text = j.choices[0].text;
    tokens = j.usage.completion_tokens;
  } else {
    const decoder = new TextDecoder();
    let buf = '';
    for await (const part of res.body) {
      buf += decoder.decode(part, { stream: true });
      let at;
      while ((at = buf.indexOf('\n\n')) >= 0) {
        const event = buf.slice(0, at);
        buf = buf.slice(at + 2);
        if (!event.startsWith('data: ') || event === 'data: [DONE]') continue;
        const j = JSON.parse(event.slice(6));
        if (j.error) return { ok: false, why: JSON.stringify(j.error) };
        if (j.choices.length) text += j.choices[0].text;
        if (first === null && text.length > 0) first = performance.now() - t0;
        if (j.usage) tokens = j.usage.completion_tokens;
      }
    }
  }
  const ms = performance.now() - t0;
  const ok = text === want[k][s];
  return { ok, ms, first, tokens, why: ok ? '' : `text differs for prompt ${k} sampling ${s}` };
}

const results = [];
const t0 = performance.now();
await Promise.all(Array.from({ length: clients }, async (_, c) => {
  for (let i = 0; i < requests; ++i) {
    const r = c * requests + i;
    results.push(await request(r % prompts.length, (r >> 1) % 2, r % 2 === 1));
  }
}));
const wall = (performance.now() - t0) / 1000;

const failed = results.filter((r) => !r.ok);
const ms = results.filter((r) => r.ok).map((r) => r.ms).sort((a, b) => a - b);
const firsts = results.filter((r) => r.ok && r.first !== null).map((r) => r.first)
  .sort((a, b) => a - b);
const pct = (a, p) => (a.length ? a[Math.min(a.length - 1, Math.floor(p * a.length))] : NaN);
const tokens = results.reduce((s, r) => s + (r.tokens || 0), 0);
console.log(`requests: ${results.length} (${clients} clients x ${requests}), failures: ` +
            `${failed.length}, wall ${wall.toFixed(1)} s, ${(tokens / wall).toFixed(1)} tok/s`);
console.log(`latency ms: p50 ${pct(ms, 0.5).toFixed(0)}, p90 ${pct(ms, 0.9).toFixed(0)}, ` +
            `p99 ${pct(ms, 0.99).toFixed(0)}, max ${ms[ms.length - 1].toFixed(0)}; ` +
            `first text (streamed) p50 ${pct(firsts, 0.5).toFixed(0)}, ` +
            `p99 ${pct(firsts, 0.99).toFixed(0)}`);
for (const f of failed.slice(0, 5)) console.log(`failure: ${f.why}`);
process.exit(failed.length === 0 ? 0 : 1);
