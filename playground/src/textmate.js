// Highlighting with the VS Code extension's TextMate grammar (vscode-extension/syntaxes/
// moe.tmLanguage.json, generated from mpl/schema.py): vscode-textmate with the Oniguruma wasm
// tokenizes each line, exactly as VS Code does, inside a CodeMirror stream language. A
// token's most specific TextMate scope maps to a standard highlighting tag (the page's CSS
// colours `.tok-*` classes); the grammar, not this file, knows the language's words.
import { StreamLanguage } from "@codemirror/language";
import { tagHighlighter, tags as t } from "@lezer/highlight";
import * as oniguruma from "vscode-oniguruma";
import * as vsctm from "vscode-textmate";

/** TextMate scope prefix -> tag (generic TextMate categories, first match wins). */
const SCOPE_TAGS = [
  ["comment", "lineComment", t.lineComment],
  ["string", "string", t.string],
  ["constant.character.escape", "escape", t.escape],
  ["constant.numeric", "number", t.number],
  ["constant.language", "bool", t.bool],
  ["keyword.other.unit", "unit", t.unit],
  ["keyword.operator", "operator", t.operator],
  ["keyword.other", "keyword", t.keyword],
  ["keyword.control", "controlKeyword", t.controlKeyword],
  ["storage.type", "definitionKeyword", t.definitionKeyword],
  ["storage.modifier", "modifier", t.modifier],
  ["entity.name.type", "typeDefinition", t.definition(t.typeName)],
  ["entity.other.inherited-class", "typeName", t.typeName],
  ["entity.name.namespace", "namespace", t.namespace],
  ["variable.parameter", "propertyName", t.propertyName],
  ["variable.other.enummember", "atom", t.atom],
  ["support.variable", "specialVariable", t.special(t.variableName)],
  ["support.function", "function", t.function(t.variableName)],
  ["variable", "variableName", t.variableName],
  ["punctuation", "punctuation", t.punctuation],
  ["invalid", "invalid", t.invalid],
];

/** Classes `tok-NAME` for the tags above (the page's CSS colours them). */
export const scopeHighlighter = tagHighlighter(SCOPE_TAGS.map(([, name, tag]) => ({ tag, class: `tok-${name}` })));

function styleOf(scopes) {
  for (let i = scopes.length - 1; i >= 0; i--) {
    const s = scopes[i];
    for (const [prefix, name] of SCOPE_TAGS) {
      if (s === prefix || s.startsWith(prefix + ".")) {
        return name;
      }
    }
  }
  return null;
}

/** The grammar's scopes of every token of ``text`` (for the page's tests and debugging). */
export function scopesOf(grammar, text) {
  let stack = vsctm.INITIAL;
  const out = [];
  for (const line of text.split("\n")) {
    const r = grammar.tokenizeLine(line, stack);
    for (const tok of r.tokens) {
      out.push({ text: line.slice(tok.startIndex, tok.endIndex), scopes: tok.scopes });
    }
    stack = r.ruleStack;
  }
  return out;
}

/** Load the grammar; returns {language (a CodeMirror LanguageSupport-able StreamLanguage), grammar}. */
export async function textmateLanguage(grammarUrl, onigUrl) {
  const [wasm, grammarText] = await Promise.all([
    fetch(onigUrl).then((r) => r.arrayBuffer()),
    fetch(grammarUrl).then((r) => r.text()),
  ]);
  await oniguruma.loadWASM(wasm);
  const raw = vsctm.parseRawGrammar(grammarText, "moe.tmLanguage.json");
  const registry = new vsctm.Registry({
    onigLib: Promise.resolve({
      createOnigScanner: (patterns) => new oniguruma.OnigScanner(patterns),
      createOnigString: (s) => new oniguruma.OnigString(s),
    }),
    loadGrammar: async (scopeName) => (scopeName === raw.scopeName ? raw : null),
  });
  const grammar = await registry.loadGrammar(raw.scopeName);
  const tokenTable = Object.fromEntries(SCOPE_TAGS.map(([, name, tag]) => [name, tag]));

  const language = StreamLanguage.define({
    name: "moe",
    startState: () => ({ stack: vsctm.INITIAL, tokens: null, next: null, i: 0, depth: 0 }),
    copyState: (s) => ({ ...s }),
    token(stream, state) {
      if (state.tokens === null || stream.sol()) {
        const r = grammar.tokenizeLine(stream.string, state.stack);
        state.tokens = r.tokens;
        state.next = r.ruleStack;
        state.i = 0;
      }
      while (state.i < state.tokens.length && state.tokens[state.i].endIndex <= stream.pos) {
        state.i++;
      }
      const tok = state.tokens[state.i];
      const end = tok === undefined ? stream.string.length : Math.min(tok.endIndex, stream.string.length);
      stream.pos = Math.max(end, stream.pos + 1);
      const style = tok === undefined ? null : styleOf(tok.scopes);
      if (style === "punctuation" || style === null) {     // braces outside comments and strings
        for (const ch of stream.current()) {
          state.depth += ch === "{" ? 1 : ch === "}" ? -1 : 0;
        }
        state.depth = Math.max(0, state.depth);
      }
      if (stream.eol()) {
        state.stack = state.next;
        state.tokens = null;
      }
      return style;
    },
    // one indent unit per open brace (language-configuration.json's rule in VS Code)
    indent(state, textAfter, cx) {
      return Math.max(0, state.depth - (/^\s*\}/.test(textAfter) ? 1 : 0)) * cx.unit;
    },
    blankLine(state) {
      state.stack = grammar.tokenizeLine("", state.stack).ruleStack;
    },
    tokenTable,
    languageData: { commentTokens: { line: "#" }, closeBrackets: { brackets: ["(", "[", "{", '"'] } },
  });
  return { language, grammar };
}
