/**
 * Tree-sitter grammar for MoE-PolicyLang (.moe, .policy) — for Neovim, Helix, Zed and any
 * other tree-sitter host. It mirrors mpl/syntax/grammar.lark (the normative syntax, SPEC
 * section 2, with the nested items, ranges, devices and call-like values of the memory tiers,
 * section 12): generic, so blocks, parameters, item kinds and enum values are names (the
 * checker knows which exist), and a half-typed file still gives a tree with ERROR nodes where
 * it breaks.
 *
 * KEYWORDS and UNITS are mpl.schema.KEYWORDS and mpl.schema.UNITS
 * (tests/test_tree_sitter_grammar.py fails when they differ).
 */

const KEYWORDS = ["version", "import", "policy", "extends", "when", "for", "trigger", "rebalance", "true", "false"];
const UNITS = ["accesses", "steps", "tokens", "GB", "GiB", "MB", "MiB", "ms", "us"];
const COMPARISON = ["<", ">", "<=", ">=", "!=", "=="];

const sep = ($) => optional(repeat1(";"));

module.exports = grammar({
  name: "moe",

  extras: ($) => [/\s/, $.comment],
  word: ($) => $.name,

  rules: {
    source_file: ($) => repeat(choice($.version, $.import, $.policy, ";")),

    comment: (_) => token(seq("#", /[^\n]*/)),

    version: ($) => seq("version", field("number", $.number)),
    import: ($) => seq("import", field("path", $.string)),

    // after `policy` and `extends` a keyword is a policy name (the original accepts `policy when`)
    _policy_name: ($) => choice($.name, alias(choice(...KEYWORDS), $.name)),
    policy: ($) => seq(
      "policy",
      field("name", $._policy_name),
      optional(seq("extends", field("parent", $._policy_name))),
      "{", repeat(choice($.block, ";")), "}",
    ),

    block: ($) => seq(field("name", $.name), "{", repeat(choice($.param, $.rule, $.item, ";")), "}"),
    param: ($) => seq(field("name", $.name), "=", field("value", $.expression)),

    // a nested item (memory tiers): its kind is a name (tier, band, on), then a label
    // (tier hot), a selector (band layers = 0..7) or an edge (on demote(hot -> warm))
    item: ($) => seq(
      field("kind", $.name),
      choice(field("label", $.name), field("selector", $.selector), field("edge", $.edge)),
      "{", repeat(choice($.param, $.rule, $.item, ";")), "}",
    ),
    selector: ($) => seq(field("name", $.name), "=", field("value", $._value)),
    edge: ($) => seq(field("event", $.name), "(", field("source", $.name), "->", field("target", $.name), ")"),

    // value ("|" value)? (":" value "when" condition)?
    expression: ($) => seq(
      $._value,
      optional(seq("|", field("fallback", $._value))),
      optional(seq(":", field("alternative", $._value), "when", field("condition", $.condition))),
    ),

    _value: ($) => choice($.range, $.quantity, $.device, $.call, $.identifier, $.boolean, $.string, $.list),
    // a..b: one token when glued to its first number (the lexer would read `0.` as a number)
    range: ($) => choice(
      token(/-?\d+\.\.[ \t]*-?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?/),
      seq(field("first", $.number), "..", field("last", $.number)),
    ),
    // a name glued to ':' and an integer: a device such as gpu:1
    device: (_) => token(/[A-Za-z_][A-Za-z0-9_]*:\d+/),
    // weighted_sum(lru = 0.5, lfu = 0.5)
    call: ($) => seq(field("function", $.name), "(",
      optional(seq($.argument, repeat(seq(",", $.argument)))), ")"),
    argument: ($) => seq(field("name", $.name), "=", field("value", $._value)),
    quantity: ($) => seq($.number, optional(field("unit", $.unit))),
    // a unit glued to the number (12GiB) or a unit word after it (12 GiB, 100 accesses)
    unit: (_) => choice(token.immediate(/[A-Za-z_][A-Za-z0-9_]*/), ...UNITS),
    identifier: ($) => $.name,
    boolean: (_) => choice("true", "false"),
    list: ($) => seq("[", optional(seq($._value, repeat(seq(",", $._value)))), "]"),

    condition: ($) => seq(field("metric", $.name), field("operator", $.operator), field("threshold", $.number)),
    operator: (_) => choice(...COMPARISON),

    rule: ($) => seq(
      "when", field("condition", $.condition),
      optional(seq("for", field("duration", $.quantity))),
      "{", repeat(choice($.set_action, $.trigger_action, $.rebalance_action, ";")), "}",
    ),
    set_action: ($) => seq(field("target", $.target), "=", field("value", $._value)),
    target: ($) => seq(optional(seq(field("block", $.name), ".")), field("name", $.name)),
    trigger_action: ($) => seq("trigger", field("name", $.name)),
    rebalance_action: ($) => seq("rebalance", field("allocation", $.name)),

    number: (_) => token(/-?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?/),
    string: (_) => token(seq('"', repeat(choice(/[^"\\\n]/, /\\./)), '"')),
    name: (_) => /[A-Za-z_][A-Za-z0-9_]*/,
  },
});
