// The JavaScript/TypeScript oracle of the real-history benchmark: the TypeScript
// compiler's own parser, no tree-sitter.
//
// usage: node ts_oracle.js TYPESCRIPT_MODULE_DIR < paths
// Reads file paths, one a line; writes one JSON object a line:
// {"file", "defs": [{name, kind, start, end}], "decls": [{name, line}]}, 1-based lines.
// defs: functions, classes, methods, accessors, constructors, interfaces, type aliases,
// enums, namespaces, and variables or assignments whose value is a function or class
// (named by the variable, or by the assigned expression: `Axios.prototype.request`),
// qualified by the named definitions around them. Spans start at the first token
// (decorators and `export` included, comments not). decls: top-level variable
// statements, class properties, interface properties and enum members (first and
// last line).
"use strict";
const fs = require("fs");
const path = require("path");
const ts = require(path.join(process.argv[2], "typescript"));
const readline = require("readline");

function kindOf(file) {
  const ext = path.extname(file).toLowerCase();
  if (ext === ".tsx") return ts.ScriptKind.TSX;
  if (ext === ".jsx") return ts.ScriptKind.JSX;
  if (ext === ".js" || ext === ".mjs" || ext === ".cjs") return ts.ScriptKind.JS;
  return ts.ScriptKind.TS;
}

function isFunctionValue(node) {
  return node && (ts.isArrowFunction(node) || ts.isFunctionExpression(node) || ts.isClassExpression(node));
}

function nameText(name, sf) {
  if (!name) return null;
  if (ts.isIdentifier(name) || ts.isPrivateIdentifier(name)) return name.text;
  if (ts.isStringLiteral(name) || ts.isNumericLiteral(name)) return name.text;
  return name.getText(sf);
}

function analyse(file) {
  const text = fs.readFileSync(file, "utf8");
  const sf = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true, kindOf(file));
  const line = (pos) => sf.getLineAndCharacterOfPosition(pos).line + 1;
  const defs = [];
  const decls = [];
  const span = (node) => [line(node.getStart(sf)), line(node.getEnd())];
  function add(name, kind, node, scope) {
    const [start, end] = span(node);
    const full = scope ? scope + "." + name : name;
    defs.push({ name: full, kind, start, end });
    return full;
  }
  function visit(node, scope, topLevel) {
    let inner = scope;
    let childTop = false;
    if (ts.isFunctionDeclaration(node) && node.name) {
      inner = add(node.name.text, "function", node, scope);
    } else if ((ts.isClassDeclaration(node) || ts.isClassExpression(node)) && node.name
               && !(node.parent && ts.isVariableDeclaration(node.parent))) {
      inner = add(node.name.text, "class", node, scope);
    } else if (ts.isMethodDeclaration(node) || ts.isGetAccessor(node) || ts.isSetAccessor(node)) {
      const n = nameText(node.name, sf);
      if (n) inner = add(n, "function", node, scope);
    } else if (ts.isConstructorDeclaration(node)) {
      inner = add("constructor", "function", node, scope);
    } else if (ts.isInterfaceDeclaration(node)) {
      inner = add(node.name.text, "type", node, scope);
    } else if (ts.isTypeAliasDeclaration(node)) {
      inner = add(node.name.text, "type", node, scope);
    } else if (ts.isEnumDeclaration(node)) {
      inner = add(node.name.text, "type", node, scope);
    } else if (ts.isModuleDeclaration(node) && node.name) {
      inner = add(nameText(node.name, sf), "type", node, scope);
    } else if (ts.isVariableStatement(node)) {
      const list = node.declarationList.declarations;
      if (list.length === 1 && ts.isIdentifier(list[0].name)) {
        const d = list[0];
        if (isFunctionValue(d.initializer)) {
          const kind = ts.isClassExpression(d.initializer) ? "class" : "function";
          inner = add(d.name.text, kind, node, scope);
        } else if (topLevel) {
          decls.push({ name: (scope ? scope + "." : "") + d.name.text, line: line(node.getStart(sf)), end: line(node.getEnd()) });
        }
      }
    } else if (ts.isPropertyDeclaration(node)) {
      const n = nameText(node.name, sf);
      if (n && isFunctionValue(node.initializer)) {
        inner = add(n, "function", node, scope);
      } else if (n) {
        decls.push({ name: (scope ? scope + "." : "") + n, line: line(node.getStart(sf)), end: line(node.getEnd()) });
      }
    } else if (ts.isPropertySignature(node) || ts.isEnumMember(node)) {
      const n = nameText(node.name, sf);
      if (n) {
        decls.push({ name: (scope ? scope + "." : "") + n, line: line(node.getStart(sf)), end: line(node.getEnd()) });
      }
    } else if (ts.isPropertyAssignment(node) && isFunctionValue(node.initializer)) {
      const n = nameText(node.name, sf);
      if (n) inner = add(n, "function", node, scope);
    } else if (ts.isExpressionStatement(node) && ts.isBinaryExpression(node.expression)
               && node.expression.operatorToken.kind === ts.SyntaxKind.EqualsToken
               && isFunctionValue(node.expression.right)) {
      const left = node.expression.left.getText(sf).replace(/\s+/g, "");
      inner = add(left, "function", node, scope);
    }
    if (ts.isModuleBlock(node)) childTop = true;
    ts.forEachChild(node, (child) => visit(child, inner, childTop));
  }
  ts.forEachChild(sf, (child) => visit(child, null, true));
  return { file, defs, decls };
}

const rl = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
const out = [];
rl.on("line", (file) => {
  if (!file) return;
  try {
    out.push(JSON.stringify(analyse(file)));
  } catch (e) {
    out.push(JSON.stringify({ file, defs: [], decls: [], error: String(e) }));
  }
  if (out.length >= 200) { process.stdout.write(out.join("\n") + "\n"); out.length = 0; }
});
rl.on("close", () => { if (out.length) process.stdout.write(out.join("\n") + "\n"); });
