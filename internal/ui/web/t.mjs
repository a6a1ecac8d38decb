import * as esbuild from "esbuild";
import path from "node:path";
const here = process.cwd();
await esbuild.build({stdin:{contents:`import { ContextService } from "@contextd/gen/contextd/v1/context_service_pb.js"; console.log(typeof ContextService, ContextService && Object.keys(ContextService), ContextService.methods && ContextService.methods.length);`, resolveDir: here, loader:"ts"}, bundle:true, format:"esm", outfile:"/tmp/t-out.mjs", plugins:[{name:"p", setup(b){ b.onResolve({filter:/^@contextd\/gen\//}, a=>({path: path.join(here,"..","..","..","clients","typescript","src","gen",a.path.slice(14).replace(/\.js$/,".ts"))}))}}]});
