// Greedy generation with transformers.js (@huggingface/transformers on onnxruntime-node).
// Usage: node peer_generate.mjs MODELS_DIR MODEL_NAME DTYPE MAX_NEW_TOKENS THREADS < prompts.json
// prompts.json: [[id, …], …]. Prints {"dtype", "outputs": [[new ids…], …], "seconds": [generate s…]}.
import { AutoModelForCausalLM, Tensor, env } from "@huggingface/transformers";
import fs from "fs";

const [dir, name, dtype, maxNew, threads] = process.argv.slice(2);
env.allowRemoteModels = false;
env.localModelPath = dir;
const session_options = {};
if (Number(threads) > 0) session_options.intraOpNumThreads = Number(threads);
const model = await AutoModelForCausalLM.from_pretrained(name, { dtype, device: "cpu", session_options });
const prompts = JSON.parse(fs.readFileSync(0, "utf8"));
const outputs = [], seconds = [];
for (const ids of prompts) {
  const input_ids = new Tensor("int64", BigInt64Array.from(ids.map(BigInt)), [1, ids.length]);
  const attention_mask = new Tensor("int64", BigInt64Array.from(ids.map(() => 1n)), [1, ids.length]);
  const t0 = process.hrtime.bigint();
  const out = await model.generate({ input_ids, attention_mask, max_new_tokens: Number(maxNew), min_new_tokens: Number(maxNew), do_sample: false });
  seconds.push(Number(process.hrtime.bigint() - t0) / 1e9);
  outputs.push(Array.from(out.data).map(Number).slice(ids.length));
}
process.stdout.write(JSON.stringify({ dtype, outputs, seconds }) + "\n");
