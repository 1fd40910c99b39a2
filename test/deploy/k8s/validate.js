#!/usr/bin/env node
// Validates rendered Kubernetes manifests offline (no cluster):
//   node validate.js FILE...    (multi-document YAML, e.g. the output of kubectl kustomize)
// 1. Each object against the Kubernetes OpenAPI schema of its apiVersion and kind, with the
//    validators of the pinned npm package kubernetes-models (types, required fields, enums,
//    formats).
// 2. Unknown fields, which those validators let through (a misspelt `imagePullPolicyy` or a
//    field at the wrong level would be dropped by the API server without a word): every key is
//    looked up in the type declarations (.d.ts) the same package ships for each schema type.
// Prints one line per problem ("FILE: Kind/name: path: what") and exits 1 if there is any.
// Needs NODE_PATH to point at the installed packages (scripts/install-k8s-tools).
"use strict";
const fs = require("fs");
const path = require("path");
const YAML = require("yaml");

// --- type declarations --------------------------------------------------------------------

const parsed = new Map(); // .d.ts file -> { props: Map<name, type text>, imports, typeMeta } | null

function dtsOf(jsFile) {
  return jsFile.replace(/\.js$/, ".d.ts");
}

function resolveImport(fromFile, spec) {
  if (spec.startsWith(".")) return path.resolve(path.dirname(fromFile), spec + ".d.ts");
  return dtsOf(require.resolve(spec));
}

// The first exported interface of a declaration file: its properties with their type text.
// A file without one (a type alias such as Quantity = string | number) is a leaf: null.
function parseDts(file) {
  if (parsed.has(file)) return parsed.get(file);
  const lines = fs.readFileSync(file, "utf8").split("\n");
  const imports = new Map();
  for (const line of lines) {
    const m = line.match(/^import \{ ([^}]+) \} from "([^"]+)";/);
    if (m) for (const name of m[1].split(",").map((s) => s.trim())) imports.set(name, m[2]);
  }
  const start = lines.findIndex((l) => /^export interface \w+/.test(l));
  if (start < 0) {
    parsed.set(file, null);
    return null;
  }
  const typeMeta = /extends TypeMeta/.test(lines[start]);
  const props = new Map();
  for (let i = start + 1; i < lines.length && !/^\}/.test(lines[i]); ++i) {
    const m = lines[i].match(/^ {4}"([^"]+)"\??: (.*)$/);
    if (!m) continue;
    let type = m[2];
    let depth = (type.match(/\{/g) || []).length - (type.match(/\}/g) || []).length;
    while (depth > 0 && i + 1 < lines.length) {
      const next = lines[++i].trim();
      type += " " + next;
      depth += (next.match(/\{/g) || []).length - (next.match(/\}/g) || []).length;
    }
    props.set(m[1], type.replace(/;\s*$/, "").trim());
  }
  const out = { file, props, imports, typeMeta };
  parsed.set(file, out);
  return out;
}

// Checks `value` against the type text `type` declared in `owner`; pushes problems.
function checkType(value, type, owner, where, problems) {
  type = type.trim();
  if (value === null || value === undefined) return;
  let m;
  if ((m = type.match(/^Array<(.+)>$/))) {
    if (Array.isArray(value)) value.forEach((v, i) => checkType(v, m[1], owner, `${where}[${i}]`, problems));
    return;
  }
  if ((m = type.match(/^\{\s*\[key: string\]: (.+?);?\s*\}$/))) {
    if (value && typeof value === "object" && !Array.isArray(value))
      for (const [k, v] of Object.entries(value)) checkType(v, m[1], owner, `${where}.${k}`, problems);
    return;
  }
  if (/^I\w+$/.test(type) && owner.imports.has(type)) {
    const decl = parseDts(resolveImport(owner.file, owner.imports.get(type)));
    if (decl) checkObject(value, decl, where, problems);
    return;
  }
  // string, number, boolean, unions, literals: the schema validator checks those.
}

function checkObject(value, decl, where, problems) {
  if (!value || typeof value !== "object" || Array.isArray(value)) return;
  for (const [key, v] of Object.entries(value)) {
    const at = where ? `${where}.${key}` : key;
    if (decl.props.has(key)) checkType(v, decl.props.get(key), decl, at, problems);
    else if (!(decl.typeMeta && (key === "apiVersion" || key === "kind")))
      problems.push(`${at}: unknown field (${path.basename(decl.file, ".d.ts")} has: ${[...decl.props.keys()].join(", ")})`);
  }
}

// --- objects ------------------------------------------------------------------------------

function modelOf(obj) {
  if (!obj || typeof obj.apiVersion !== "string" || typeof obj.kind !== "string") return null;
  if (!/^[a-z0-9.]*\/?v\d\w*$/.test(obj.apiVersion) || !/^[A-Z]\w*$/.test(obj.kind)) return null;
  const spec = `kubernetes-models/${obj.apiVersion}/${obj.kind}`;
  try {
    const file = require.resolve(spec);
    return { cls: require(spec)[obj.kind], dts: dtsOf(file) };
  } catch (e) {
    return null;
  }
}

function validate(file) {
  const problems = [];
  const docs = YAML.parseAllDocuments(fs.readFileSync(file, "utf8"));
  let count = 0;
  for (const doc of docs) {
    if (doc.errors.length) {
      problems.push(`${file}: YAML: ${doc.errors[0].message}`);
      continue;
    }
    const obj = doc.toJS();
    if (obj === null) continue;
    ++count;
    const name = `${obj.kind || "?"}/${(obj.metadata && obj.metadata.name) || "?"}`;
    const model = modelOf(obj);
    if (!model) {
      problems.push(`${file}: ${name}: no Kubernetes schema for apiVersion '${obj.apiVersion}' kind '${obj.kind}'`);
      continue;
    }
    try {
      new model.cls(obj).validate();
    } catch (e) {
      const details = (e.errors || []).map((x) => `${x.instancePath || "/"} ${x.message}`);
      problems.push(`${file}: ${name}: schema: ${details.length ? details.join("; ") : e.message}`);
    }
    const unknown = [];
    checkObject(obj, parseDts(model.dts), "", unknown);
    for (const u of unknown) problems.push(`${file}: ${name}: ${u}`);
  }
  return { problems, count };
}

const files = process.argv.slice(2);
if (files.length === 0) {
  console.error("usage: validate.js FILE...   (rendered Kubernetes manifests)");
  process.exit(2);
}
let bad = 0;
for (const f of files) {
  const { problems, count } = validate(f);
  for (const p of problems) console.log(p);
  bad += problems.length;
  if (!problems.length) console.log(`${f}: ${count} object(s) valid`);
}
process.exit(bad ? 1 : 0);
