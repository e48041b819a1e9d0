// Driver of test/agents/agent-example.test.ts (a process of its own: jest cannot import an ES
// module): runs examples/search-agent.mjs through collectEpisodes against the endpoint at
// argv[2] with seed argv[3], questions per batch argv[4], group size argv[5], on the questions
// of the JSON file argv[6], and prints the records as JSON. Until `mempo serve` records tagged
// calls itself, the wrapper below writes each call the agent made (the ids and log-probs the
// endpoint answered) into the recorder, as the endpoint will.
import { readFileSync } from 'node:fs';
import { collectEpisodes, EpisodeRecorder } from 'mempo';
import { agent, reward } from '../../examples/search-agent.mjs';

const [base, seed, perBatch, groupSize, file] = process.argv.slice(2);
const tasks = JSON.parse(readFileSync(file, 'utf8'));
const recorder = new EpisodeRecorder();
const models = await (await fetch(`${base}/v1/models`)).json();
const out = await collectEpisodes({
  tasks, groupSize: Number(groupSize), seed: Number(seed), questionsPerBatch: Number(perBatch),
  endpoint: { baseURL: `${base}/v1`, model: models.data[0].id, recorder, maxContextTokens: models.data[0].max_model_len },
  agent: async (task, client) => {
    const result = await agent(task, client);
    for (const c of result.calls) {
      recorder.admit(client.episode, c.promptIds.length, c.sampledIds.length);
      recorder.record(client.episode, { ...c, finishReason: 'stop', weightVersion: 0 });
    }
    return result;
  },
  reward,
});
process.stdout.write(JSON.stringify({ records: out.records, failed: out.failed }));
