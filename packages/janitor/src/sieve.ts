/**
 * A Sieve (RFC 5228) tokenizer and parser, and the decision whether a script forwards all mail.
 *
 * Grammar (RFC 5228 section 8):
 *   commands    = *command
 *   command     = identifier arguments (";" / block)
 *   block       = "{" commands "}"
 *   arguments   = *argument [ test / test-list ]
 *   argument    = string-list / number / tag
 *   test        = identifier arguments
 *   test-list   = "(" test *("," test) ")"
 *   string-list = "[" string *("," string) "]" / string
 * Strings are quoted ("...", with \" and \\) or multi-line (text: ... "." on its own line, with
 * dot-stuffing). Comments: "#" to the end of the line, and "/* ... *\/". Numbers may carry K, M or G.
 */

export type TokenType = "identifier" | "tag" | "number" | "string" | "punct" | "eof";

export interface Token {
  type: TokenType;
  /** Identifier and tag names are lower-cased (Sieve is case-insensitive there); strings are decoded. */
  value: string;
  number: number;
  line: number;
}

export class SieveSyntaxError extends Error {
  readonly line: number;

  constructor(message: string, line: number) {
    super(`line ${line}: ${message}`);
    this.name = "SieveSyntaxError";
    this.line = line;
  }
}

const QUANTIFIER: Record<string, number> = { k: 1024, m: 1024 ** 2, g: 1024 ** 3 };
const PUNCTUATION = "[](){},;";

function isIdentifierStart(ch: string | undefined): boolean {
  return ch !== undefined && /[A-Za-z_]/.test(ch);
}

function isIdentifierChar(ch: string | undefined): boolean {
  return ch !== undefined && /[A-Za-z0-9_]/.test(ch);
}

export function tokenize(script: string): Token[] {
  const source = script.startsWith("\uFEFF") ? script.slice(1) : script;
  const tokens: Token[] = [];
  let i = 0;
  let line = 1;
  const push = (type: TokenType, value: string, number = 0, at = line) => {
    tokens.push({ type, value, number, line: at });
  };

  while (i < source.length) {
    const ch = source[i] as string;
    if (ch === "\n") {
      line += 1;
      i += 1;
    } else if (ch === " " || ch === "\t" || ch === "\r") {
      i += 1;
    } else if (ch === "#") {
      while (i < source.length && source[i] !== "\n") i += 1;
    } else if (ch === "/" && source[i + 1] === "*") {
      const end = source.indexOf("*/", i + 2);
      if (end < 0) throw new SieveSyntaxError("unterminated bracket comment", line);
      for (let j = i; j < end; j += 1) if (source[j] === "\n") line += 1;
      i = end + 2;
    } else if (ch === '"') {
      const start = line;
      let value = "";
      i += 1;
      for (;;) {
        if (i >= source.length) throw new SieveSyntaxError("unterminated quoted string", start);
        const c = source[i] as string;
        if (c === '"') {
          i += 1;
          break;
        }
        if (c === "\\") {
          const next = source[i + 1];
          if (next === undefined) throw new SieveSyntaxError("unterminated quoted string", start);
          if (next === "\n") line += 1;
          value += next;
          i += 2;
          continue;
        }
        if (c === "\n") line += 1;
        value += c;
        i += 1;
      }
      push("string", value, 0, start);
    } else if (/[0-9]/.test(ch)) {
      let j = i;
      while (/[0-9]/.test(source[j] ?? "")) j += 1;
      let value = Number(source.slice(i, j));
      const quantifier = QUANTIFIER[(source[j] ?? "").toLowerCase()];
      if (quantifier !== undefined) {
        value *= quantifier;
        j += 1;
      }
      if (isIdentifierChar(source[j]))
        throw new SieveSyntaxError(`invalid number "${source.slice(i, j + 1)}"`, line);
      push("number", source.slice(i, j), value);
      i = j;
    } else if (ch === ":") {
      if (!isIdentifierStart(source[i + 1])) throw new SieveSyntaxError('":" must start a tag', line);
      let j = i + 1;
      while (isIdentifierChar(source[j])) j += 1;
      push("tag", source.slice(i + 1, j).toLowerCase());
      i = j;
    } else if (isIdentifierStart(ch)) {
      let j = i;
      while (isIdentifierChar(source[j])) j += 1;
      const name = source.slice(i, j).toLowerCase();
      if (name === "text" && source[j] === ":") {
        const result = readMultiLine(source, j + 1, line);
        push("string", result.value, 0, line);
        line = result.line;
        i = result.end;
      } else {
        push("identifier", name);
        i = j;
      }
    } else if (PUNCTUATION.includes(ch)) {
      push("punct", ch);
      i += 1;
    } else {
      throw new SieveSyntaxError(`unexpected character ${JSON.stringify(ch)}`, line);
    }
  }
  push("eof", "");
  return tokens;
}

/** Reads a `text:` string starting right after the colon; returns the decoded value and where it ended. */
function readMultiLine(
  source: string,
  from: number,
  startLine: number,
): { value: string; end: number; line: number } {
  let i = from;
  while (source[i] === " " || source[i] === "\t") i += 1;
  if (source[i] === "#") {
    while (i < source.length && source[i] !== "\n") i += 1;
  } else if (source[i] === "\r" && source[i + 1] === "\n") {
    i += 1;
  }
  if (source[i] !== "\n") throw new SieveSyntaxError('"text:" must be followed by a line break', startLine);
  i += 1;
  let line = startLine + 1;
  const lines: string[] = [];
  for (;;) {
    if (i >= source.length)
      throw new SieveSyntaxError('multi-line string is not terminated by "."', startLine);
    let end = source.indexOf("\n", i);
    const hasBreak = end >= 0;
    if (!hasBreak) end = source.length;
    let text = source.slice(i, end);
    if (text.endsWith("\r")) text = text.slice(0, -1);
    i = hasBreak ? end + 1 : end;
    if (text === ".") {
      return { value: lines.map((l) => `${l}\r\n`).join(""), end: i, line: hasBreak ? line + 1 : line };
    }
    lines.push(text.startsWith(".") ? text.slice(1) : text);
    line += 1;
  }
}

export type Argument =
  | { kind: "strings"; values: string[] }
  | { kind: "number"; value: number }
  | { kind: "tag"; name: string };

export interface Test {
  name: string;
  args: Argument[];
  tests: Test[];
  line: number;
}

export interface Command {
  name: string;
  args: Argument[];
  tests: Test[];
  /** null when the command ended with ";". */
  block: Command[] | null;
  line: number;
}

class Parser {
  readonly #tokens: Token[];
  #position = 0;

  constructor(tokens: Token[]) {
    this.#tokens = tokens;
  }

  #peek(): Token {
    return this.#tokens[this.#position] as Token;
  }

  #isPunct(value: string): boolean {
    return this.#peek().type === "punct" && this.#peek().value === value;
  }

  #expectPunct(value: string, what: string): void {
    if (!this.#isPunct(value))
      throw new SieveSyntaxError(`expected ${what}, found ${describe(this.#peek())}`, this.#peek().line);
    this.#position += 1;
  }

  parseScript(): Command[] {
    const commands = this.#commands();
    if (this.#peek().type !== "eof") {
      throw new SieveSyntaxError(`unexpected ${describe(this.#peek())}`, this.#peek().line);
    }
    return commands;
  }

  #commands(): Command[] {
    const commands: Command[] = [];
    while (this.#peek().type === "identifier") commands.push(this.#command());
    return commands;
  }

  #command(): Command {
    const start = this.#peek();
    this.#position += 1;
    const { args, tests } = this.#arguments();
    let block: Command[] | null = null;
    if (this.#isPunct(";")) {
      this.#position += 1;
    } else if (this.#isPunct("{")) {
      this.#position += 1;
      block = this.#commands();
      this.#expectPunct("}", '"}" or a command');
    } else {
      throw new SieveSyntaxError(
        `expected ";" or "{" after "${start.value}", found ${describe(this.#peek())}`,
        this.#peek().line,
      );
    }
    return { name: start.value, args, tests, block, line: start.line };
  }

  #arguments(): { args: Argument[]; tests: Test[] } {
    const args: Argument[] = [];
    for (;;) {
      const token = this.#peek();
      if (token.type === "string" || this.#isPunct("[")) args.push(this.#stringList());
      else if (token.type === "number") {
        args.push({ kind: "number", value: token.number });
        this.#position += 1;
      } else if (token.type === "tag") {
        args.push({ kind: "tag", name: token.value });
        this.#position += 1;
      } else break;
    }
    let tests: Test[] = [];
    if (this.#peek().type === "identifier") tests = [this.#test()];
    else if (this.#isPunct("(")) tests = this.#testList();
    return { args, tests };
  }

  #stringList(): Argument {
    if (this.#peek().type === "string") {
      const value = this.#peek().value;
      this.#position += 1;
      return { kind: "strings", values: [value] };
    }
    this.#expectPunct("[", '"["');
    const values: string[] = [];
    for (;;) {
      if (this.#peek().type !== "string") {
        throw new SieveSyntaxError(
          `expected a string in the list, found ${describe(this.#peek())}`,
          this.#peek().line,
        );
      }
      values.push(this.#peek().value);
      this.#position += 1;
      if (this.#isPunct(",")) {
        this.#position += 1;
        continue;
      }
      this.#expectPunct("]", '"," or "]"');
      return { kind: "strings", values };
    }
  }

  #test(): Test {
    const start = this.#peek();
    if (start.type !== "identifier")
      throw new SieveSyntaxError(`expected a test, found ${describe(start)}`, start.line);
    this.#position += 1;
    const { args, tests } = this.#arguments();
    return { name: start.value, args, tests, line: start.line };
  }

  #testList(): Test[] {
    this.#expectPunct("(", '"("');
    const tests = [this.#test()];
    while (this.#isPunct(",")) {
      this.#position += 1;
      tests.push(this.#test());
    }
    this.#expectPunct(")", '"," or ")"');
    return tests;
  }
}

function describe(token: Token): string {
  switch (token.type) {
    case "eof":
      return "end of script";
    case "string":
      return "a string";
    case "number":
      return `number ${token.value}`;
    case "tag":
      return `tag ":${token.value}"`;
    default:
      return `"${token.value}"`;
  }
}

/** Checks the structural rules of the core language that the grammar alone does not express. */
function validate(commands: Command[]): void {
  let previous: string | null = null;
  for (const command of commands) {
    const { name, line } = command;
    if (name === "if" || name === "elsif") {
      if (name === "elsif" && previous !== "if" && previous !== "elsif") {
        throw new SieveSyntaxError('"elsif" without a preceding "if"', line);
      }
      if (command.tests.length !== 1 || command.args.length > 0) {
        throw new SieveSyntaxError(`"${name}" needs exactly one test`, line);
      }
      if (command.block === null) throw new SieveSyntaxError(`"${name}" needs a block`, line);
      validateTest(command.tests[0] as Test);
    } else if (name === "else") {
      if (previous !== "if" && previous !== "elsif")
        throw new SieveSyntaxError('"else" without a preceding "if"', line);
      if (command.args.length > 0 || command.tests.length > 0 || command.block === null) {
        throw new SieveSyntaxError('"else" takes no arguments and needs a block', line);
      }
    } else if (name === "require") {
      if (command.args.length !== 1 || command.args[0]?.kind !== "strings" || command.tests.length > 0) {
        throw new SieveSyntaxError('"require" needs one string list', line);
      }
    } else if (name === "redirect") {
      // The address is the last argument; extensions may add tagged ones before it (:copy, :notify "...").
      const last = command.args.at(-1);
      if (last?.kind !== "strings" || last.values.length !== 1) {
        throw new SieveSyntaxError('"redirect" needs one address', line);
      }
    }
    if (
      ["require", "stop", "keep", "discard", "redirect", "fileinto"].includes(name) &&
      command.block !== null
    ) {
      throw new SieveSyntaxError(`"${name}" takes no block`, line);
    }
    if (command.block !== null) validate(command.block);
    previous = name;
  }
}

function validateTest(test: Test): void {
  if (test.name === "not" && test.tests.length !== 1)
    throw new SieveSyntaxError('"not" needs one test', test.line);
  if ((test.name === "anyof" || test.name === "allof") && test.tests.length === 0) {
    throw new SieveSyntaxError(`"${test.name}" needs a test list`, test.line);
  }
  for (const inner of test.tests) validateTest(inner);
}

/** Parses a script into its commands; throws SieveSyntaxError. */
export function parse(script: string): Command[] {
  const commands = new Parser(tokenize(script)).parseScript();
  validate(commands);
  return commands;
}

/**
 * Folds a test to a constant where the core language allows: `true`, `false`, and `not`, `allof`,
 * `anyof` over constants. Everything else depends on the message: null.
 */
export function constantValue(test: Test): boolean | null {
  switch (test.name) {
    case "true":
      return true;
    case "false":
      return false;
    case "not": {
      const inner = constantValue(test.tests[0] as Test);
      return inner === null ? null : !inner;
    }
    case "allof": {
      const values = test.tests.map(constantValue);
      if (values.includes(false)) return false;
      return values.every((v) => v === true) ? true : null;
    }
    case "anyof": {
      const values = test.tests.map(constantValue);
      if (values.includes(true)) return true;
      return values.every((v) => v === false) ? false : null;
    }
    default:
      return null;
  }
}

/** Commands that neither keep a local copy nor end the script. */
const NEUTRAL = new Set([
  "require",
  "discard",
  "reject",
  "ereject",
  "vacation",
  "notify",
  "set",
  "setflag",
  "addflag",
  "removeflag",
  "addheader",
  "deleteheader",
]);

export interface Decision {
  forwardsAll: boolean;
  reason: string;
}

interface Walk {
  /** Line of the unconditional redirect (without :copy) that forwards every message, once reached. */
  redirectLine: number | null;
  /** Why the script cannot count as forwarding everything, once known. */
  veto: string | null;
}

/**
 * Decides whether a script forwards every message and keeps nothing in the mailbox:
 * - a `redirect` without `:copy` must be reached unconditionally: at top level, or inside blocks
 *   whose test is constantly true (`if true`, also `not false`, `anyof(true, ...)`, `allof(true)`);
 *   a redirect under any test that depends on the message does not count;
 * - no `stop` (or `return`) may come before it, not even a conditional one (matching mail would
 *   stay in the mailbox through the implicit keep);
 * - no `keep` or `fileinto` may run anywhere, before or after, conditional or not (dead code such as
 *   `if false { keep; }` or anything after an unconditional `stop` is ignored);
 * - any command outside the core actions (`include`, `pipe`, ...) makes the answer "no", since its
 *   effect cannot be known here;
 * - a script that does not parse is "no".
 */
export function decide(script: string): Decision {
  let commands: Command[];
  try {
    commands = parse(script);
  } catch (error) {
    return {
      forwardsAll: false,
      reason: `parse error: ${error instanceof Error ? error.message : String(error)}`,
    };
  }
  const state: Walk = { redirectLine: null, veto: null };
  walk(commands, false, state);
  if (state.veto !== null) return { forwardsAll: false, reason: state.veto };
  if (state.redirectLine === null) return { forwardsAll: false, reason: "no unconditional redirect" };
  return { forwardsAll: true, reason: `unconditional redirect at line ${state.redirectLine}` };
}

export function forwardsAllMail(script: string): boolean {
  return decide(script).forwardsAll;
}

/** Walks commands in execution order; returns true when the list ends in a stop for every message reaching it. */
function walk(commands: Command[], conditional: boolean, state: Walk): boolean {
  let i = 0;
  while (i < commands.length) {
    const command = commands[i] as Command;
    i += 1;
    switch (command.name) {
      case "if": {
        const chain = [command];
        while (i < commands.length && ["elsif", "else"].includes((commands[i] as Command).name)) {
          chain.push(commands[i] as Command);
          i += 1;
        }
        if (walkChain(chain, conditional, state)) return true;
        break;
      }
      case "stop":
      case "return":
        if (state.redirectLine === null)
          state.veto ??= `"${command.name}" before the redirect at line ${command.line}`;
        return true;
      case "redirect":
        if (!conditional && !command.args.some((arg) => arg.kind === "tag" && arg.name === "copy")) {
          state.redirectLine ??= command.line;
        }
        break;
      case "keep":
      case "fileinto":
        state.veto ??= `"${command.name}" at line ${command.line} keeps a copy in the mailbox`;
        break;
      default:
        if (!NEUTRAL.has(command.name)) {
          state.veto ??= `"${command.name}" at line ${command.line} has an effect that cannot be judged`;
        }
    }
  }
  return false;
}

/** An if/elsif/else chain; returns true when it stops every message that reaches it. */
function walkChain(chain: Command[], conditional: boolean, state: Walk): boolean {
  let dependsOnMessage = false;
  for (const branch of chain) {
    const value = branch.name === "else" ? true : constantValue(branch.tests[0] as Test);
    if (value === false) continue;
    const stops = walk(branch.block ?? [], conditional || dependsOnMessage || value === null, state);
    if (value === true) return stops && !dependsOnMessage;
    dependsOnMessage = true;
  }
  return false;
}
