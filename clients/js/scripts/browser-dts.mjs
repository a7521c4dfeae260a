#!/usr/bin/env node
// Generates browser/client.d.ts, the types of herenow's browser client,
// from the one source: crates/herenow-server/assets/client.js and its JSDoc.
//
//   npm run browser-types                 writes browser/client.d.ts
//   node scripts/browser-dts.mjs --check  fails (exit 1) when it differs
//
// The file is checked in (the package ships it; crates/ is not in the
// package) and test/browser-dts.test.mjs fails when it differs from what
// client.js generates, so a change to client.js that changes its types
// must come with the regenerated file.
//
// The served /client.js stays a build-free script: one IIFE that sets the
// global `Herenow`. TypeScript emits nothing for the inside of an IIFE, so
// this script hands the compiler, in memory, the same code as a module
// (the IIFE's body, exporting what the IIFE puts on `Herenow`), checks it
// (checkJs: the JSDoc must agree with the code), has tsc emit its
// declarations, and wraps them in `declare namespace Herenow { … }` plus
// `Window.Herenow`. Nothing is copied to disk; a test runs --check, so the
// checked-in file cannot drift from client.js.

import { readFileSync, writeFileSync, mkdirSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";

const here = dirname(fileURLToPath(import.meta.url));
const pkg = resolve(here, "..");
export const SOURCE = resolve(pkg, "../../crates/herenow-server/assets/client.js");
export const OUTPUT = join(pkg, "browser/client.d.ts");
const VIRTUAL = join(dirname(SOURCE), "__herenow_client_module__.js");

function fail(message) {
  throw new Error(`browser-dts: ${message}`);
}

/** The IIFE `(function (global) { … })(…)` of client.js, and what it puts on `global.Herenow`. */
function unwrap(text) {
  const file = ts.createSourceFile(SOURCE, text, ts.ScriptTarget.ES2022, true, ts.ScriptKind.JS);
  const iife = file.statements.find(
    (s) =>
      ts.isExpressionStatement(s) &&
      ts.isCallExpression(s.expression) &&
      ts.isParenthesizedExpression(s.expression.expression) &&
      ts.isFunctionExpression(s.expression.expression.expression),
  );
  if (!iife) fail(`${SOURCE} has no (function (global) { … })(…) wrapper`);
  const fn = iife.expression.expression.expression;
  const param = fn.parameters[0]?.name.getText(file);
  if (fn.parameters.length !== 1 || !param) fail("the wrapper must take one parameter (the global object)");
  const body = fn.body.statements;
  const last = body[body.length - 1];
  const ok =
    last &&
    ts.isExpressionStatement(last) &&
    ts.isBinaryExpression(last.expression) &&
    last.expression.operatorToken.kind === ts.SyntaxKind.EqualsToken &&
    last.expression.left.getText(file) === `${param}.Herenow` &&
    ts.isObjectLiteralExpression(last.expression.right);
  if (!ok) fail(`the wrapper must end with \`${param}.Herenow = { … }\``);
  const exported = [];
  const constants = [];
  for (const p of last.expression.right.properties) {
    if (ts.isShorthandPropertyAssignment(p)) exported.push(p.name.text);
    else if (ts.isPropertyAssignment(p) && ts.isIdentifier(p.name)) constants.push(`export const ${p.name.text} = ${p.initializer.getText(file)};`);
    else fail(`\`${param}.Herenow\` may hold names and constants only, not ${p.getText(file)}`);
  }
  // The body as a module: the same statements (with their comments), the
  // parameter as a module constant, the global's members as exports.
  const statements = body.slice(0, -1).map((s) => s.getFullText(file)).join("");
  const module = [
    `const ${param} = window;`,
    statements,
    `export { ${exported.join(", ")} };`,
    ...constants,
    "",
  ].join("\n");
  return module;
}

const OPTIONS = {
  allowJs: true,
  checkJs: true,
  declaration: true,
  emitDeclarationOnly: true,
  stripInternal: true,
  strict: true,
  noImplicitAny: false,
  target: ts.ScriptTarget.ES2022,
  module: ts.ModuleKind.ES2022,
  moduleResolution: ts.ModuleResolutionKind.Bundler,
  lib: ["lib.es2022.d.ts", "lib.dom.d.ts", "lib.dom.iterable.d.ts"],
  types: [],
  newLine: ts.NewLineKind.LineFeed,
  noEmitOnError: true,
  skipLibCheck: true,
  skipDefaultLibCheck: true,
};

/** tsc's declarations for the module text, after checking it. */
function declarations(moduleText) {
  const host = ts.createCompilerHost(OPTIONS, true);
  const getSourceFile = host.getSourceFile.bind(host);
  host.getSourceFile = (name, lang, onError, create) =>
    resolve(name) === VIRTUAL ? ts.createSourceFile(name, moduleText, lang, true, ts.ScriptKind.JS) : getSourceFile(name, lang, onError, create);
  const fileExists = host.fileExists.bind(host);
  host.fileExists = (name) => resolve(name) === VIRTUAL || fileExists(name);
  const readFile = host.readFile.bind(host);
  host.readFile = (name) => (resolve(name) === VIRTUAL ? moduleText : readFile(name));
  let out = null;
  host.writeFile = (name, text) => {
    if (name.endsWith(".d.ts")) out = text;
  };
  const program = ts.createProgram([VIRTUAL], OPTIONS, host);
  const diagnostics = [...ts.getPreEmitDiagnostics(program)];
  if (diagnostics.length === 0) diagnostics.push(...program.emit(undefined, undefined, undefined, true).diagnostics);
  if (diagnostics.length > 0) {
    // Point at client.js, not at the in-memory module: report the line's text.
    const lines = diagnostics.map((d) => {
      const msg = ts.flattenDiagnosticMessageText(d.messageText, "\n");
      if (!d.file) return msg;
      const { line } = d.file.getLineAndCharacterOfPosition(d.start ?? 0);
      const src = d.file.text.split("\n")[line]?.trim() ?? "";
      return `client.js: ${msg}\n    at: ${src}`;
    });
    fail(`the browser client does not check:\n${lines.join("\n")}`);
  }
  if (out === null) fail("tsc emitted no declarations");
  return out;
}

/**
 * A JSDoc comment without the types it gave the checker (the declarations
 * carry them now): `@param {T} x d` → `@param x d`, `@returns {T} d` →
 * `@returns d`, `@type`/`@extends`/`@internal` tags dropped. `null` when
 * nothing is left.
 */
export function cleanComment(comment) {
  let out = "";
  for (let i = 0; i < comment.length; ) {
    const m = /^@(param|returns|type|extends|augments|template)\s*\{/.exec(comment.slice(i));
    if (!m) {
      out += comment[i++];
      continue;
    }
    let j = i + m[0].length;
    for (let depth = 1; j < comment.length && depth > 0; j++) {
      if (comment[j] === "{") depth++;
      else if (comment[j] === "}") depth--;
    }
    const tag = m[1];
    if (tag === "param" || tag === "template") {
      out += `@${tag}`;
    } else if (tag === "returns") {
      out += "@returns";
    }
    // @type / @extends / @augments: the whole tag goes, description included
    // (they hold none here).
    i = j;
  }
  // Drop tags left with nothing to say, then empty lines at either end.
  const lines = out
    .replace(/^\/\*\*|\*\/$/g, "")
    .split("\n")
    .map((l) => l.replace(/^\s*\*\s?/, "").trimEnd())
    .filter((l) => {
      const t = l.trim();
      return !/^@(returns|internal|type|extends|augments)\s*$/.test(t) && !/^@internal\b/.test(t) && !/^@(param|template)\s+\[?[\w.$]+(=[^\]]*)?\]?$/.test(t);
    })
    .map((l) => l.replace(/\s+$/, ""));
  while (lines.length && lines[0].trim() === "") lines.shift();
  while (lines.length && lines[lines.length - 1].trim() === "") lines.pop();
  if (lines.length === 0) return null;
  if (lines.length === 1) return `/** ${lines[0].trim()} */`;
  return ["/**", ...lines.map((l) => (l ? ` * ${l}` : " *")), " */"].join("\n");
}

/** Whether a class member is the browser client's own business: `_name` or `@internal`. */
function isInternal(member) {
  const name = member.name && (ts.isIdentifier(member.name) || ts.isPrivateIdentifier(member.name)) ? member.name.text : "";
  return name.startsWith("_") || ts.getJSDocTags(member).some((t) => t.tagName.text === "internal");
}

/** The module's declarations as the global namespace `Herenow`. */
function globalize(dts) {
  const file = ts.createSourceFile("client.d.ts", dts, ts.ScriptTarget.ES2022, true, ts.ScriptKind.TS);
  const f = ts.factory;
  const printer = ts.createPrinter({ newLine: ts.NewLineKind.LineFeed, removeComments: false });
  const keep = (mods) => (mods ?? []).filter((m) => m.kind !== ts.SyntaxKind.DeclareKeyword && m.kind !== ts.SyntaxKind.ExportKeyword && m.kind !== ts.SyntaxKind.DefaultKeyword);
  const exported = (mods) => [f.createModifier(ts.SyntaxKind.ExportKeyword), ...keep(mods)];
  // The JSDoc a node had: its last /** */ comment (a statement's earlier
  // ones are typedefs, emitted as types of their own).
  const doc = (node) => {
    const ranges = ts.getLeadingCommentRanges(dts, node.pos) ?? [];
    const last = [...ranges].reverse().find((r) => dts.slice(r.pos, r.pos + 3) === "/**");
    return last ? cleanComment(dts.slice(last.pos, last.end)) : null;
  };
  // The node's own comments are replaced by its cleaned JSDoc.
  const withDoc = (node, text) => {
    ts.setEmitFlags(node, ts.EmitFlags.NoComments);
    if (!text) return node;
    return ts.addSyntheticLeadingComment(node, ts.SyntaxKind.MultiLineCommentTrivia, text.slice(2, -2), true);
  };
  const members = [];
  for (const s of file.statements) {
    if (ts.isExportDeclaration(s) || ts.isExportAssignment(s) || ts.isImportDeclaration(s)) continue;
    let node;
    if (ts.isClassDeclaration(s)) {
      const kept = s.members.filter((m) => !isInternal(m)).map((m) => withDoc(m, doc(m)));
      node = f.updateClassDeclaration(s, exported(s.modifiers), s.name, s.typeParameters, s.heritageClauses, kept);
    } else if (ts.isTypeAliasDeclaration(s)) {
      node = f.updateTypeAliasDeclaration(s, exported(s.modifiers), s.name, s.typeParameters, documentMembers(s.type, doc, withDoc));
    } else if (ts.isInterfaceDeclaration(s)) {
      node = f.updateInterfaceDeclaration(s, exported(s.modifiers), s.name, s.typeParameters, s.heritageClauses, s.members.map((m) => withDoc(m, doc(m))));
    } else if (ts.isVariableStatement(s)) {
      node = f.updateVariableStatement(s, exported(s.modifiers), s.declarationList);
    } else if (ts.isFunctionDeclaration(s)) {
      node = f.updateFunctionDeclaration(s, exported(s.modifiers), s.asteriskToken, s.name, s.typeParameters, s.parameters, s.type, undefined);
    } else {
      fail(`unexpected declaration in tsc's output: ${s.getText(file).slice(0, 80)}`);
    }
    members.push(withDoc(node, doc(s)));
  }
  const body = members.map((m) => printer.printNode(ts.EmitHint.Unspecified, m, file)).join("\n");
  const indented = body
    .split("\n")
    .map((l) => (l ? `    ${l}` : l))
    .join("\n");
  return [
    "// Generated by clients/js/scripts/browser-dts.mjs from",
    "// crates/herenow-server/assets/client.js and its JSDoc: do not edit.",
    "// Regenerate with `npm run browser-types` in clients/js; its tests fail when",
    "// this file and client.js disagree.",
    "//",
    "// The types of the browser client that herenow serves at /client.js",
    "// (a plain <script> that sets the global `Herenow`). In a TypeScript",
    '// project: /// <reference types="herenow-client/browser" />, or',
    '// "types": ["herenow-client/browser"] in tsconfig.json.',
    "",
    "declare namespace Herenow {",
    indented,
    "}",
    "",
    "interface Window {",
    "    /** herenow's browser client, from /client.js. */",
    "    Herenow: typeof Herenow;",
    "}",
    "",
  ].join("\n");
}

/** The members of an object type literal, each with its JSDoc. */
function documentMembers(type, doc, withDoc) {
  if (!ts.isTypeLiteralNode(type)) return type;
  return ts.factory.updateTypeLiteralNode(type, ts.factory.createNodeArray(type.members.map((m) => withDoc(m, doc(m)))));
}

/** The declarations client.js stands for now. */
export function generate() {
  return globalize(declarations(unwrap(readFileSync(SOURCE, "utf8"))));
}

if (import.meta.url === `file://${process.argv[1]}` || resolve(process.argv[1] ?? "") === fileURLToPath(import.meta.url)) {
  const check = process.argv.includes("--check");
  try {
    const text = generate();
    if (check) {
      let current = null;
      try {
        current = readFileSync(OUTPUT, "utf8");
      } catch {
        // missing: a difference
      }
      if (current !== text) {
        console.error(`browser-dts: ${OUTPUT} is out of date with ${SOURCE}; run \`npm run browser-types\` in clients/js`);
        process.exit(1);
      }
      console.log("browser-dts: browser/client.d.ts matches client.js");
    } else {
      mkdirSync(dirname(OUTPUT), { recursive: true });
      writeFileSync(OUTPUT, text);
      console.log(`browser-dts: wrote ${OUTPUT}`);
    }
  } catch (e) {
    console.error(e instanceof Error ? e.message : e);
    process.exit(1);
  }
}
