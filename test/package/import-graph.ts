/**
 * The import graph of a TypeScript source tree, read with the TypeScript parser (not a regex, so
 * multi-line and `export … from` imports count), and the import circles in it.
 *
 * Type-only imports are edges too: a circle of types is harmless at run time but is the same
 * layering fault (issue 45: shared shapes belong below the modules that use them).
 */
import * as fs from 'fs';
import * as path from 'path';
import * as ts from 'typescript';

export interface ImportGraph {
  /** Absolute file path → the files it imports, in source order. */
  edges: Map<string, string[]>;
  /** Relative specifiers that name no file in the tree, as "file: specifier". */
  unresolved: string[];
}

function listTs(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) return listTs(p);
    return e.isFile() && e.name.endsWith('.ts') && !e.name.endsWith('.d.ts') ? [p] : [];
  });
}

/** Every module specifier in a file: import/export declarations, `import x = require()`, `import()`, `require()`, `import('x').T`. */
export function specifiersOf(file: string, text: string): string[] {
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.ES2022, false, ts.ScriptKind.TS);
  const found: string[] = [];
  const visit = (node: ts.Node): void => {
    if ((ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) && node.moduleSpecifier && ts.isStringLiteral(node.moduleSpecifier)) {
      found.push(node.moduleSpecifier.text);
    } else if (ts.isImportEqualsDeclaration(node) && ts.isExternalModuleReference(node.moduleReference)) {
      const e = node.moduleReference.expression;
      if (ts.isStringLiteral(e)) found.push(e.text);
    } else if (ts.isCallExpression(node) && node.arguments.length === 1 && ts.isStringLiteralLike(node.arguments[0]!)) {
      const isImport = node.expression.kind === ts.SyntaxKind.ImportKeyword;
      const isRequire = ts.isIdentifier(node.expression) && node.expression.text === 'require';
      if (isImport || isRequire) found.push((node.arguments[0] as ts.StringLiteralLike).text);
    } else if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument) && ts.isStringLiteral(node.argument.literal)) {
      found.push(node.argument.literal.text);
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

function resolve(from: string, spec: string, files: Set<string>): string | undefined {
  const base = path.resolve(path.dirname(from), spec);
  const stem = base.replace(/\.(js|mjs|cjs)$/, '');
  return [base, `${stem}.ts`, path.join(base, 'index.ts')].find((c) => files.has(c));
}

/** The graph of relative imports between the .ts files under `root` (package imports are not edges). */
export function importGraph(root: string): ImportGraph {
  const files = listTs(path.resolve(root));
  const known = new Set(files);
  const edges = new Map<string, string[]>();
  const unresolved: string[] = [];
  for (const file of files) {
    const targets: string[] = [];
    for (const spec of specifiersOf(file, fs.readFileSync(file, 'utf8'))) {
      if (!spec.startsWith('.')) continue;
      const target = resolve(file, spec, known);
      if (target === undefined) unresolved.push(`${path.relative(root, file)}: ${spec}`);
      else if (!targets.includes(target)) targets.push(target);
    }
    edges.set(file, targets);
  }
  return { edges, unresolved };
}

/**
 * One circle per strongly connected component that has one (Tarjan), each written as the path
 * `a -> b -> … -> a`, so a failure names the imports to cut. Empty when the graph is acyclic.
 */
export function findCycles(edges: Map<string, string[]>): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const components: string[][] = [];
  const strongConnect = (v: string): void => {
    index.set(v, index.size);
    low.set(v, index.get(v)!);
    stack.push(v);
    onStack.add(v);
    for (const w of edges.get(v) ?? []) {
      if (!index.has(w)) {
        strongConnect(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) {
        low.set(v, Math.min(low.get(v)!, index.get(w)!));
      }
    }
    if (low.get(v) === index.get(v)) {
      const component: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        component.push(w);
      } while (w !== v);
      if (component.length > 1 || (edges.get(v) ?? []).includes(v)) components.push(component);
    }
  };
  for (const v of edges.keys()) if (!index.has(v)) strongConnect(v);
  return components.map((c) => circleWithin(edges, new Set(c)));
}

/** A shortest path from the component's first member back to itself, staying inside the component (breadth first). */
function circleWithin(edges: Map<string, string[]>, component: Set<string>): string[] {
  const start = [...component].sort()[0]!;
  const previous = new Map<string, string>();
  const queue = [start];
  while (queue.length > 0) {
    const v = queue.shift()!;
    for (const w of edges.get(v) ?? []) {
      if (!component.has(w)) continue;
      if (w === start) {
        const circle = [start];
        for (let u = v; u !== start; u = previous.get(u)!) circle.unshift(u);
        circle.unshift(start);
        return circle;
      }
      if (!previous.has(w)) {
        previous.set(w, v);
        queue.push(w);
      }
    }
  }
  throw new Error(`no circle through ${start} in its own component`); // unreachable for a real component
}
