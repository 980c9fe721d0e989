/**
 * The build of a mutant's scratch copy. A full `tsc` build type-checks and emits all of src/ —
 * some 7 CPU-seconds, for each of forty mutants, while the other mutant's killers run beside it.
 * A mutant edits one or two files, and the build compiles each file alone (`isolatedModules`,
 * `verbatimModuleSyntax`: test/unit/mutants.test.ts checks that every unmutated file compiled
 * so is byte for byte what tsc emitted), so a copy gets the unmutated build's dist/ with only its
 * edited files emitted again, after the type check tsc would have done of them (EditTypeCheck). Files outside src/ are not compiled (the migrations are read from src/, the
 * tests run from TypeScript); anything else edited (a tsconfig, the package) gets a full build.
 */
import { cpSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import ts from 'typescript';

/** The build's options (tsconfig.build.json), emitting a file's JavaScript alone. */
export function emitOptions(root: string): ts.CompilerOptions {
  const file = path.join(root, 'tsconfig.build.json');
  const { config, error } = ts.readConfigFile(file, ts.sys.readFile);
  if (error)
    throw new Error(`${file}: ${ts.flattenDiagnosticMessageText(error.messageText, '\n')}`);
  const { options } = ts.parseJsonConfigFileContent(config, ts.sys, root);
  // The package is "type": "module", so NodeNext emits every .ts as an ES module; a file compiled
  // alone has no package.json to look at, and would be emitted as CommonJS under NodeNext.
  return {
    ...options,
    module: ts.ModuleKind.ESNext,
    moduleResolution: ts.ModuleResolutionKind.Bundler,
    // Where the file goes is emittedPath's business; transpileModule would check the name
    // given against them.
    rootDir: undefined,
    outDir: undefined,
    declaration: false,
    declarationMap: false,
    sourceMap: false,
  };
}

/** `text` of `file` (relative to the root) compiled alone; throws on a syntax error. */
export function emit(text: string, file: string, options: ts.CompilerOptions): string {
  const out = ts.transpileModule(text, {
    compilerOptions: options,
    fileName: file,
    reportDiagnostics: true,
  });
  const errors = (out.diagnostics ?? []).filter((d) => d.category === ts.DiagnosticCategory.Error);
  if (errors.length > 0) {
    const first = ts.flattenDiagnosticMessageText(errors[0]!.messageText, '\n');
    throw new Error(`does not build: ${file}: ${first}`);
  }
  return out.outputText;
}

/** Where tsc writes the JavaScript of `file` (src/a/b.ts → dist/a/b.js). */
export function emittedPath(file: string): string {
  return path.join('dist', path.relative('src', file)).replace(/\.ts$/, '.js');
}

/** Whether the copy's dist/ can be the unmutated one with `files` emitted again. */
export function emitsAlone(files: readonly string[]): boolean {
  return files.every((f) => f.startsWith('src/') || f.startsWith('test/') || f.startsWith('jobs/'));
}

/**
 * Gives `dir` (a copy with `edited` already written) the build of `builtDir` (the unmutated
 * copy, built by tsc) with the edited src/ TypeScript files emitted again.
 */
export function buildFromBuilt(
  dir: string,
  builtDir: string,
  edited: readonly { file: string; text: string }[],
): void {
  cpSync(path.join(builtDir, 'dist'), path.join(dir, 'dist'), { recursive: true });
  const options = emitOptions(dir);
  for (const { file, text } of edited) {
    if (!file.startsWith('src/') || !file.endsWith('.ts') || file.endsWith('.d.ts')) continue;
    writeFileSync(path.join(dir, emittedPath(file)), emit(text, file, options));
  }
}

/**
 * The type check tsc's build did, for the edited files only: each checked, with the mutant's
 * text, in a program that reuses the unmutated one for every other file. A mutant that misspells
 * a name or imports a type as a value would otherwise run, fail every killer at its first import,
 * and count as killed. An edit that breaks a caller in another file is not seen: that file's
 * JavaScript is the unmutated one, and runs as before.
 */
export class EditTypeCheck {
  private readonly host: ts.CompilerHost;
  private readonly base: ts.Program;

  constructor(private readonly root: string) {
    const file = path.join(root, 'tsconfig.build.json');
    const { config } = ts.readConfigFile(file, ts.sys.readFile);
    const { options, fileNames } = ts.parseJsonConfigFileContent(config, ts.sys, root);
    this.host = ts.createCompilerHost(options);
    this.base = ts.createProgram(fileNames, { ...options, noEmit: true }, this.host);
  }

  /** The type errors of the edited TypeScript files of src/, as tsc prints them; [] if none. */
  errors(edited: readonly { file: string; text: string }[]): string[] {
    const texts = new Map(
      edited
        .filter(({ file }) => file.startsWith('src/') && file.endsWith('.ts'))
        .map(({ file, text }) => [path.resolve(this.root, file), text]),
    );
    if (texts.size === 0) return [];
    const host: ts.CompilerHost = {
      ...this.host,
      getSourceFile: (fileName, languageVersion, onError, shouldCreate) => {
        const text = texts.get(path.resolve(fileName));
        if (text != null) return ts.createSourceFile(fileName, text, languageVersion, true);
        return (
          this.base.getSourceFile(fileName) ??
          this.host.getSourceFile(fileName, languageVersion, onError, shouldCreate)
        );
      },
      readFile: (fileName) => texts.get(path.resolve(fileName)) ?? this.host.readFile(fileName),
    };
    const program = ts.createProgram({
      rootNames: this.base.getRootFileNames(),
      options: this.base.getCompilerOptions(),
      host,
      oldProgram: this.base,
    });
    const format: ts.FormatDiagnosticsHost = {
      getCanonicalFileName: (f) => f,
      getCurrentDirectory: () => this.root,
      getNewLine: () => '\n',
    };
    return [...texts.keys()].flatMap((fileName) => {
      const source = program.getSourceFile(fileName)!;
      return [...program.getSyntacticDiagnostics(source), ...program.getSemanticDiagnostics(source)]
        .filter((d) => d.category === ts.DiagnosticCategory.Error)
        .map((d) => ts.formatDiagnostic(d, format).trim());
    });
  }
}
