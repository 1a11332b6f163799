// Encodes each JSON-string line of stdin with @huggingface/tokenizers and prints the ids,
// space-separated, one line per input line. Usage: node peer_encode.mjs tokenizer.json [tokenizer_config.json]
import { Tokenizer } from "@huggingface/tokenizers";
import fs from "fs";

const tj = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));
const tc = process.argv[3] ? JSON.parse(fs.readFileSync(process.argv[3], "utf8")) : {};
const tok = new Tokenizer(tj, tc);
const lines = fs.readFileSync(0, "utf8").split("\n").filter((l) => l !== "");
const out = [];
for (const l of lines) {
  const ids = tok.encode(JSON.parse(l), { add_special_tokens: false }).ids;
  out.push(ids.join(" "));
}
process.stdout.write(out.join("\n") + "\n");
