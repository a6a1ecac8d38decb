// Bundles src/main.ts and the generated client it imports
// (clients/typescript/src/gen) into ../static/app.js. The runtime packages
// (@bufbuild/protobuf, @connectrpc/*) always resolve from this directory's
// node_modules, so the bundle holds one copy of each whatever else is
// installed beside the generated code. The output is deterministic: CI
// rebuilds it and fails when it differs from the committed file.
import * as esbuild from "esbuild";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));

const pinned = {
  name: "pinned-runtime",
  setup(build) {
    build.onResolve({ filter: /^@bufbuild\/protobuf|^@connectrpc\// }, (args) => ({ path: fileURLToPath(import.meta.resolve(args.path)) }));
    build.onResolve({ filter: /^@contextd\/gen\// }, (args) => ({
      path: path.join(here, "..", "..", "..", "clients", "typescript", "src", "gen", args.path.slice("@contextd/gen/".length).replace(/\.js$/, ".ts")),
    }));
  },
};

await esbuild.build({
  entryPoints: [path.join(here, "src", "main.ts")],
  outfile: path.join(here, "..", "static", "app.js"),
  bundle: true,
  format: "esm",
  target: ["es2022"],
  minify: true,
  legalComments: "eof",
  charset: "utf8",
  plugins: [pinned],
  logLevel: "warning",
});
