// Reference token ids for tts/chattts's Go WordPiece tokenizer, from tokenizers.js
// (npm @huggingface/tokenizers, the pure-JS implementation of Hugging Face tokenizers).
//
//   node train/tts/chattts_tokenizer_ref.mjs NODE_DIR DATA_DIR
//
// NODE_DIR holds node_modules/@huggingface/tokenizers (`build/setup.sh peers` installs it into
// ~/.cache/parley/peers/current); DATA_DIR holds the tokenizer variants (*.json) and corpus.jsonl from train/tts/chattts_tokenizer.py.
// For every variant it writes VARIANT.ids.jsonl: one JSON array of ids per corpus line, as
// encode(line, {add_special_tokens: false}) gives them (ChatTTS's encode_plus call).
import { createRequire } from "node:module";
import fs from "node:fs";
import path from "node:path";

const [nodeDir, dataDir] = process.argv.slice(2);
if (!nodeDir || !dataDir) {
  console.error("usage: node chattts_tokenizer_ref.mjs NODE_DIR DATA_DIR");
  process.exit(2);
}
const require = createRequire(path.resolve(nodeDir) + "/");
const { Tokenizer } = require("@huggingface/tokenizers");
const pkg = path.join(path.dirname(path.dirname(require.resolve("@huggingface/tokenizers"))), "package.json");
const version = JSON.parse(fs.readFileSync(pkg, "utf8")).version;
const lines = fs.readFileSync(path.join(dataDir, "corpus.jsonl"), "utf8").split("\n").filter((l) => l !== "").map((l) => JSON.parse(l));
for (const f of fs.readdirSync(dataDir).sort()) {
  if (!f.endsWith(".json")) continue;
  const tok = new Tokenizer(JSON.parse(fs.readFileSync(path.join(dataDir, f), "utf8")), {});
  const out = lines.map((l) => JSON.stringify(tok.encode(l, { add_special_tokens: false }).ids)).join("\n") + "\n";
  const name = f.replace(/\.json$/, ".ids.jsonl");
  fs.writeFileSync(path.join(dataDir, name), out);
  console.log(`${name}: ${lines.length} lines (@huggingface/tokenizers ${version})`);
}
