// Renders templates with @huggingface/jinja. stdin: [{"template": T, "vars": {…}}, …];
// stdout: [rendered string or {"error": message}, …].
import { Template } from "@huggingface/jinja";
import fs from "fs";

const cases = JSON.parse(fs.readFileSync(0, "utf8"));
const out = cases.map(({ template, vars }) => {
  try {
    return new Template(template).render(vars);
  } catch (e) {
    return { error: String(e.message || e) };
  }
});
process.stdout.write(JSON.stringify(out) + "\n");
