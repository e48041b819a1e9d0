// Driver of test/agents/agent-example.test.ts (a process of its own: jest cannot import an ES
// module): starts `mempo serve`'s handler over the embedded model on loopback, recording into an
// EpisodeRecorder, runs examples/search-agent.mjs through collectEpisodes against it with seed
// argv[2], questions per batch argv[3], group size argv[4], on the questions of the JSON file
// argv[5], and prints the records (made from what the endpoint recorded) as JSON.
import { readFileSync } from 'node:fs';
import { collectEpisodes, createCompletionsServer, EMBEDDED, EpisodeRecorder, LocalModel } from 'mempo';
import { agent, reward } from '../../examples/search-agent.mjs';

const [seed, perBatch, groupSize, file] = process.argv.slice(2);
const tasks = JSON.parse(readFileSync(file, 'utf8'));
// One intra-op thread, as the test's built-in run: the same float reductions.
const local = await LocalModel.load(EMBEDDED.model(), { load: { sessionOptions: { intraOpNumThreads: 1 } } });
const recorder = new EpisodeRecorder();
const server = createCompletionsServer(local, { recorder });
await new Promise((res) => server.listen(0, '127.0.0.1', res));
const base = `http://127.0.0.1:${server.address().port}`;
try {
  const out = await collectEpisodes({
    tasks, groupSize: Number(groupSize), seed: Number(seed), questionsPerBatch: Number(perBatch),
    endpoint: { baseURL: `${base}/v1`, model: 'mempo-tiny', recorder, maxContextTokens: local.maxContextTokens },
    agent, reward,
  });
  process.stdout.write(JSON.stringify({ records: out.records, failed: out.failed }));
} finally {
  server.close();
  server.closeAllConnections();
  await local.dispose();
}
