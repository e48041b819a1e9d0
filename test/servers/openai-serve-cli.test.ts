/**
 * `mempo serve --chat-template FILE`: /v1/chat/completions renders with that template instead of
 * the model's (as vLLM's flag does); a file that cannot be read or does not parse stops the
 * command before it listens, naming the option; a template without tools refuses them by field.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startServe } from '../../src/cli/serve';
import { MempoError } from '../../src/errors';
import { MODEL_DIR } from '../pipeline/helpers';
import { sink } from '../cli/run-cli';

const dir = mkdtempSync(join(tmpdir(), 'mempo-chat-template-'));
const file = (name: string, text: string) => {
  const p = join(dir, name);
  writeFileSync(p, text);
  return p;
};
const opts = (extra: Record<string, unknown>) => ({ model: MODEL_DIR, host: '127.0.0.1', port: 0, maxConcurrency: 1, maxBody: 1 << 20, ...extra });

test('--chat-template renders chat prompts with that template', async () => {
  const template = file('plain.jinja', "{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}{% if add_generation_prompt %}[assistant] {% endif %}");
  const err = sink();
  const serving = await startServe(opts({ chatTemplate: template }), { stdout: sink(), stderr: err });
  try {
    expect(err.text()).toContain('POST /v1/chat/completions');
    const post = async (body: unknown) => {
      const res = await fetch(`${serving.url}/v1/chat/completions`, { method: 'POST', body: JSON.stringify(body) });
      return { status: res.status, json: (await res.json()) as Record<string, any> };
    };
    const messages = [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Who?' }];
    const ok = await post({ messages, max_tokens: 2, seed: 1, return_token_ids: true });
    expect(ok.status).toBe(200);
    expect(serving.model.model.tokenizer!.decode(ok.json['prompt_token_ids'])).toBe('[system] Be brief.\n[user] Who?\n[assistant] ');
    const tools = await post({ messages, tools: [{ type: 'function', function: { name: 'search' } }] });
    expect(tools.status).toBe(400);
    expect(tools.json['error']).toMatchObject({ param: 'tools', type: 'invalid_request_error', code: 400 });
  } finally {
    serving.server.closeAllConnections();
    await new Promise((r) => serving.server.close(r));
    await serving.model.dispose();
  }
});

test('an unreadable or unparsable --chat-template is ERR_INVALID_OPTION before listening', async () => {
  const missing = startServe(opts({ chatTemplate: join(dir, 'nope.jinja') }), { stdout: sink(), stderr: sink() });
  await expect(missing).rejects.toThrow(MempoError);
  await expect(missing).rejects.toMatchObject({ code: 'ERR_INVALID_OPTION', message: expect.stringContaining('--chat-template') });
  const broken = startServe(opts({ chatTemplate: file('broken.jinja', '{% for m in messages %}') }), { stdout: sink(), stderr: sink() });
  await expect(broken).rejects.toMatchObject({ code: 'ERR_INVALID_OPTION', message: expect.stringContaining('chat template does not parse') });
});
