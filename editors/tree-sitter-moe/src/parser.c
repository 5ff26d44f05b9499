#include "tree_sitter/parser.h"

#if defined(__GNUC__) || defined(__clang__)
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#endif

#define LANGUAGE_VERSION 14
#define STATE_COUNT 124
#define LARGE_STATE_COUNT 2
#define SYMBOL_COUNT 80
#define ALIAS_COUNT 0
#define TOKEN_COUNT 47
#define EXTERNAL_TOKEN_COUNT 0
#define FIELD_COUNT 25
#define MAX_ALIAS_SEQUENCE_LENGTH 7
#define PRODUCTION_ID_COUNT 24

enum ts_symbol_identifiers {
  sym_name = 1,
  anon_sym_SEMI = 2,
  sym_comment = 3,
  anon_sym_version = 4,
  anon_sym_import = 5,
  anon_sym_policy = 6,
  anon_sym_extends = 7,
  anon_sym_when = 8,
  anon_sym_for = 9,
  anon_sym_trigger = 10,
  anon_sym_rebalance = 11,
  anon_sym_true = 12,
  anon_sym_false = 13,
  anon_sym_LBRACE = 14,
  anon_sym_RBRACE = 15,
  anon_sym_EQ = 16,
  anon_sym_LPAREN = 17,
  anon_sym_DASH_GT = 18,
  anon_sym_RPAREN = 19,
  anon_sym_PIPE = 20,
  anon_sym_COLON = 21,
  aux_sym_range_token1 = 22,
  anon_sym_DOT_DOT = 23,
  sym_device = 24,
  anon_sym_COMMA = 25,
  aux_sym_unit_token1 = 26,
  anon_sym_accesses = 27,
  anon_sym_steps = 28,
  anon_sym_tokens = 29,
  anon_sym_GB = 30,
  anon_sym_GiB = 31,
  anon_sym_MB = 32,
  anon_sym_MiB = 33,
  anon_sym_ms = 34,
  anon_sym_us = 35,
  anon_sym_LBRACK = 36,
  anon_sym_RBRACK = 37,
  anon_sym_LT = 38,
  anon_sym_GT = 39,
  anon_sym_LT_EQ = 40,
  anon_sym_GT_EQ = 41,
  anon_sym_BANG_EQ = 42,
  anon_sym_EQ_EQ = 43,
  anon_sym_DOT = 44,
  sym_number = 45,
  sym_string = 46,
  sym_source_file = 47,
  sym_version = 48,
  sym_import = 49,
  sym__policy_name = 50,
  sym_policy = 51,
  sym_block = 52,
  sym_param = 53,
  sym_item = 54,
  sym_selector = 55,
  sym_edge = 56,
  sym_expression = 57,
  sym__value = 58,
  sym_range = 59,
  sym_call = 60,
  sym_argument = 61,
  sym_quantity = 62,
  sym_unit = 63,
  sym_identifier = 64,
  sym_boolean = 65,
  sym_list = 66,
  sym_condition = 67,
  sym_operator = 68,
  sym_rule = 69,
  sym_set_action = 70,
  sym_target = 71,
  sym_trigger_action = 72,
  sym_rebalance_action = 73,
  aux_sym_source_file_repeat1 = 74,
  aux_sym_policy_repeat1 = 75,
  aux_sym_block_repeat1 = 76,
  aux_sym_call_repeat1 = 77,
  aux_sym_list_repeat1 = 78,
  aux_sym_rule_repeat1 = 79,
};

static const char * const ts_symbol_names[] = {
  [ts_builtin_sym_end] = "end",
  [sym_name] = "name",
  [anon_sym_SEMI] = ";",
  [sym_comment] = "comment",
  [anon_sym_version] = "version",
  [anon_sym_import] = "import",
  [anon_sym_policy] = "policy",
  [anon_sym_extends] = "extends",
  [anon_sym_when] = "when",
  [anon_sym_for] = "for",
  [anon_sym_trigger] = "trigger",
  [anon_sym_rebalance] = "rebalance",
  [anon_sym_true] = "true",
  [anon_sym_false] = "false",
  [anon_sym_LBRACE] = "{",
  [anon_sym_RBRACE] = "}",
  [anon_sym_EQ] = "=",
  [anon_sym_LPAREN] = "(",
  [anon_sym_DASH_GT] = "->",
  [anon_sym_RPAREN] = ")",
  [anon_sym_PIPE] = "|",
  [anon_sym_COLON] = ":",
  [aux_sym_range_token1] = "range_token1",
  [anon_sym_DOT_DOT] = "..",
  [sym_device] = "device",
  [anon_sym_COMMA] = ",",
  [aux_sym_unit_token1] = "unit_token1",
  [anon_sym_accesses] = "accesses",
  [anon_sym_steps] = "steps",
  [anon_sym_tokens] = "tokens",
  [anon_sym_GB] = "GB",
  [anon_sym_GiB] = "GiB",
  [anon_sym_MB] = "MB",
  [anon_sym_MiB] = "MiB",
  [anon_sym_ms] = "ms",
  [anon_sym_us] = "us",
  [anon_sym_LBRACK] = "[",
  [anon_sym_RBRACK] = "]",
  [anon_sym_LT] = "<",
  [anon_sym_GT] = ">",
  [anon_sym_LT_EQ] = "<=",
  [anon_sym_GT_EQ] = ">=",
  [anon_sym_BANG_EQ] = "!=",
  [anon_sym_EQ_EQ] = "==",
  [anon_sym_DOT] = ".",
  [sym_number] = "number",
  [sym_string] = "string",
  [sym_source_file] = "source_file",
  [sym_version] = "version",
  [sym_import] = "import",
  [sym__policy_name] = "_policy_name",
  [sym_policy] = "policy",
  [sym_block] = "block",
  [sym_param] = "param",
  [sym_item] = "item",
  [sym_selector] = "selector",
  [sym_edge] = "edge",
  [sym_expression] = "expression",
  [sym__value] = "_value",
  [sym_range] = "range",
  [sym_call] = "call",
  [sym_argument] = "argument",
  [sym_quantity] = "quantity",
  [sym_unit] = "unit",
  [sym_identifier] = "identifier",
  [sym_boolean] = "boolean",
  [sym_list] = "list",
  [sym_condition] = "condition",
  [sym_operator] = "operator",
  [sym_rule] = "rule",
  [sym_set_action] = "set_action",
  [sym_target] = "target",
  [sym_trigger_action] = "trigger_action",
  [sym_rebalance_action] = "rebalance_action",
  [aux_sym_source_file_repeat1] = "source_file_repeat1",
  [aux_sym_policy_repeat1] = "policy_repeat1",
  [aux_sym_block_repeat1] = "block_repeat1",
  [aux_sym_call_repeat1] = "call_repeat1",
  [aux_sym_list_repeat1] = "list_repeat1",
  [aux_sym_rule_repeat1] = "rule_repeat1",
};

static const TSSymbol ts_symbol_map[] = {
  [ts_builtin_sym_end] = ts_builtin_sym_end,
  [sym_name] = sym_name,
  [anon_sym_SEMI] = anon_sym_SEMI,
  [sym_comment] = sym_comment,
  [anon_sym_version] = anon_sym_version,
  [anon_sym_import] = anon_sym_import,
  [anon_sym_policy] = anon_sym_policy,
  [anon_sym_extends] = anon_sym_extends,
  [anon_sym_when] = anon_sym_when,
  [anon_sym_for] = anon_sym_for,
  [anon_sym_trigger] = anon_sym_trigger,
  [anon_sym_rebalance] = anon_sym_rebalance,
  [anon_sym_true] = anon_sym_true,
  [anon_sym_false] = anon_sym_false,
  [anon_sym_LBRACE] = anon_sym_LBRACE,
  [anon_sym_RBRACE] = anon_sym_RBRACE,
  [anon_sym_EQ] = anon_sym_EQ,
  [anon_sym_LPAREN] = anon_sym_LPAREN,
  [anon_sym_DASH_GT] = anon_sym_DASH_GT,
  [anon_sym_RPAREN] = anon_sym_RPAREN,
  [anon_sym_PIPE] = anon_sym_PIPE,
  [anon_sym_COLON] = anon_sym_COLON,
  [aux_sym_range_token1] = aux_sym_range_token1,
  [anon_sym_DOT_DOT] = anon_sym_DOT_DOT,
  [sym_device] = sym_device,
  [anon_sym_COMMA] = anon_sym_COMMA,
  [aux_sym_unit_token1] = aux_sym_unit_token1,
  [anon_sym_accesses] = anon_sym_accesses,
  [anon_sym_steps] = anon_sym_steps,
  [anon_sym_tokens] = anon_sym_tokens,
  [anon_sym_GB] = anon_sym_GB,
  [anon_sym_GiB] = anon_sym_GiB,
  [anon_sym_MB] = anon_sym_MB,
  [anon_sym_MiB] = anon_sym_MiB,
  [anon_sym_ms] = anon_sym_ms,
  [anon_sym_us] = anon_sym_us,
  [anon_sym_LBRACK] = anon_sym_LBRACK,
  [anon_sym_RBRACK] = anon_sym_RBRACK,
  [anon_sym_LT] = anon_sym_LT,
  [anon_sym_GT] = anon_sym_GT,
  [anon_sym_LT_EQ] = anon_sym_LT_EQ,
  [anon_sym_GT_EQ] = anon_sym_GT_EQ,
  [anon_sym_BANG_EQ] = anon_sym_BANG_EQ,
  [anon_sym_EQ_EQ] = anon_sym_EQ_EQ,
  [anon_sym_DOT] = anon_sym_DOT,
  [sym_number] = sym_number,
  [sym_string] = sym_string,
  [sym_source_file] = sym_source_file,
  [sym_version] = sym_version,
  [sym_import] = sym_import,
  [sym__policy_name] = sym__policy_name,
  [sym_policy] = sym_policy,
  [sym_block] = sym_block,
  [sym_param] = sym_param,
  [sym_item] = sym_item,
  [sym_selector] = sym_selector,
  [sym_edge] = sym_edge,
  [sym_expression] = sym_expression,
  [sym__value] = sym__value,
  [sym_range] = sym_range,
  [sym_call] = sym_call,
  [sym_argument] = sym_argument,
  [sym_quantity] = sym_quantity,
  [sym_unit] = sym_unit,
  [sym_identifier] = sym_identifier,
  [sym_boolean] = sym_boolean,
  [sym_list] = sym_list,
  [sym_condition] = sym_condition,
  [sym_operator] = sym_operator,
  [sym_rule] = sym_rule,
  [sym_set_action] = sym_set_action,
  [sym_target] = sym_target,
  [sym_trigger_action] = sym_trigger_action,
  [sym_rebalance_action] = sym_rebalance_action,
  [aux_sym_source_file_repeat1] = aux_sym_source_file_repeat1,
  [aux_sym_policy_repeat1] = aux_sym_policy_repeat1,
  [aux_sym_block_repeat1] = aux_sym_block_repeat1,
  [aux_sym_call_repeat1] = aux_sym_call_repeat1,
  [aux_sym_list_repeat1] = aux_sym_list_repeat1,
  [aux_sym_rule_repeat1] = aux_sym_rule_repeat1,
};

static const TSSymbolMetadata ts_symbol_metadata[] = {
  [ts_builtin_sym_end] = {
    .visible = false,
    .named = true,
  },
  [sym_name] = {
    .visible = true,
    .named = true,
  },
  [anon_sym_SEMI] = {
    .visible = true,
    .named = false,
  },
  [sym_comment] = {
    .visible = true,
    .named = true,
  },
  [anon_sym_version] = {
    .visible = true,
    .named = false,
  },
  [anon_sym_import] = {
    .visible = true,
    .named = false,
  },
  [anon_sym_policy] = {
    .visible = true,
    .named = false,
  },
  [anon_sym_extends] = {
    .visible = true,
    .named = false,
  },
  [anon_sym_when] = {
    .visible = true,
    .named = false,
  },
  [anon_sym_for] = {
    .visible = true,
    .named = false,
  },
  [anon_sym_trigger] = {
    .visible = true,
    .named = false,
  },
  [anon_sym_rebalance] = {
    .visible = true,
    .named = false,
  },
  [anon_sym_true] = {
    .visible = true,
    .named = false,
  },
  [anon_sym_false] = {
    .visible = true,
    .named = false,
  },
  [anon_sym_LBRACE] = {
    .visible = true,
    .named = false,
  },
  [anon_sym_RBRACE] = {
    .visible = true,
    .named = false,
  },
  [anon_sym_EQ] = {
    .visible = true,
    .named = false,
  },
  [anon_sym_LPAREN] = {
    .visible = true,
    .named = false,
  },
  [anon_sym_DASH_GT] = {
    .visible = true,
    .named = false,
  },
  [anon_sym_RPAREN] = {
    .visible = true,
    .named = false,
  },
  [anon_sym_PIPE] = {
    .visible = true,
    .named = false,
  },
  [anon_sym_COLON] = {
    .visible = true,
    .named = false,
  },
  [aux_sym_range_token1] = {
    .visible = false,
    .named = false,
  },
  [anon_sym_DOT_DOT] = {
    .visible = true,
    .named = false,
  },
  [sym_device] = {
    .visible = true,
    .named = true,
  },
  [anon_sym_COMMA] = {
    .visible = true,
    .named = false,
  },
  [aux_sym_unit_token1] = {
    .visible = false,
    .named = false,
  },
  [anon_sym_accesses] = {
    .visible = true,
    .named = false,
  },
  [anon_sym_steps] = {
    .visible = true,
    .named = false,
  },
  [anon_sym_tokens] = {
    .visible = true,
    .named = false,
  },
  [anon_sym_GB] = {
    .visible = true,
    .named = false,
  },
  [anon_sym_GiB] = {
    .visible = true,
    .named = false,
  },
  [anon_sym_MB] = {
    .visible = true,
    .named = false,
  },
  [anon_sym_MiB] = {
    .visible = true,
    .named = false,
  },
  [anon_sym_ms] = {
    .visible = true,
    .named = false,
  },
  [anon_sym_us] = {
    .visible = true,
    .named = false,
  },
  [anon_sym_LBRACK] = {
    .visible = true,
    .named = false,
  },
  [anon_sym_RBRACK] = {
    .visible = true,
    .named = false,
  },
  [anon_sym_LT] = {
    .visible = true,
    .named = false,
  },
  [anon_sym_GT] = {
    .visible = true,
    .named = false,
  },
  [anon_sym_LT_EQ] = {
    .visible = true,
    .named = false,
  },
  [anon_sym_GT_EQ] = {
    .visible = true,
    .named = false,
  },
  [anon_sym_BANG_EQ] = {
    .visible = true,
    .named = false,
  },
  [anon_sym_EQ_EQ] = {
    .visible = true,
    .named = false,
  },
  [anon_sym_DOT] = {
    .visible = true,
    .named = false,
  },
  [sym_number] = {
    .visible = true,
    .named = true,
  },
  [sym_string] = {
    .visible = true,
    .named = true,
  },
  [sym_source_file] = {
    .visible = true,
    .named = true,
  },
  [sym_version] = {
    .visible = true,
    .named = true,
  },
  [sym_import] = {
    .visible = true,
    .named = true,
  },
  [sym__policy_name] = {
    .visible = false,
    .named = true,
  },
  [sym_policy] = {
    .visible = true,
    .named = true,
  },
  [sym_block] = {
    .visible = true,
    .named = true,
  },
  [sym_param] = {
    .visible = true,
    .named = true,
  },
  [sym_item] = {
    .visible = true,
    .named = true,
  },
  [sym_selector] = {
    .visible = true,
    .named = true,
  },
  [sym_edge] = {
    .visible = true,
    .named = true,
  },
  [sym_expression] = {
    .visible = true,
    .named = true,
  },
  [sym__value] = {
    .visible = false,
    .named = true,
  },
  [sym_range] = {
    .visible = true,
    .named = true,
  },
  [sym_call] = {
    .visible = true,
    .named = true,
  },
  [sym_argument] = {
    .visible = true,
    .named = true,
  },
  [sym_quantity] = {
    .visible = true,
    .named = true,
  },
  [sym_unit] = {
    .visible = true,
    .named = true,
  },
  [sym_identifier] = {
    .visible = true,
    .named = true,
  },
  [sym_boolean] = {
    .visible = true,
    .named = true,
  },
  [sym_list] = {
    .visible = true,
    .named = true,
  },
  [sym_condition] = {
    .visible = true,
    .named = true,
  },
  [sym_operator] = {
    .visible = true,
    .named = true,
  },
  [sym_rule] = {
    .visible = true,
    .named = true,
  },
  [sym_set_action] = {
    .visible = true,
    .named = true,
  },
  [sym_target] = {
    .visible = true,
    .named = true,
  },
  [sym_trigger_action] = {
    .visible = true,
    .named = true,
  },
  [sym_rebalance_action] = {
    .visible = true,
    .named = true,
  },
  [aux_sym_source_file_repeat1] = {
    .visible = false,
    .named = false,
  },
  [aux_sym_policy_repeat1] = {
    .visible = false,
    .named = false,
  },
  [aux_sym_block_repeat1] = {
    .visible = false,
    .named = false,
  },
  [aux_sym_call_repeat1] = {
    .visible = false,
    .named = false,
  },
  [aux_sym_list_repeat1] = {
    .visible = false,
    .named = false,
  },
  [aux_sym_rule_repeat1] = {
    .visible = false,
    .named = false,
  },
};

enum ts_field_identifiers {
  field_allocation = 1,
  field_alternative = 2,
  field_block = 3,
  field_condition = 4,
  field_duration = 5,
  field_edge = 6,
  field_event = 7,
  field_fallback = 8,
  field_first = 9,
  field_function = 10,
  field_kind = 11,
  field_label = 12,
  field_last = 13,
  field_metric = 14,
  field_name = 15,
  field_number = 16,
  field_operator = 17,
  field_parent = 18,
  field_path = 19,
  field_selector = 20,
  field_source = 21,
  field_target = 22,
  field_threshold = 23,
  field_unit = 24,
  field_value = 25,
};

static const char * const ts_field_names[] = {
  [0] = NULL,
  [field_allocation] = "allocation",
  [field_alternative] = "alternative",
  [field_block] = "block",
  [field_condition] = "condition",
  [field_duration] = "duration",
  [field_edge] = "edge",
  [field_event] = "event",
  [field_fallback] = "fallback",
  [field_first] = "first",
  [field_function] = "function",
  [field_kind] = "kind",
  [field_label] = "label",
  [field_last] = "last",
  [field_metric] = "metric",
  [field_name] = "name",
  [field_number] = "number",
  [field_operator] = "operator",
  [field_parent] = "parent",
  [field_path] = "path",
  [field_selector] = "selector",
  [field_source] = "source",
  [field_target] = "target",
  [field_threshold] = "threshold",
  [field_unit] = "unit",
  [field_value] = "value",
};

static const TSFieldMapSlice ts_field_map_slices[PRODUCTION_ID_COUNT] = {
  [1] = {.index = 0, .length = 1},
  [2] = {.index = 1, .length = 1},
  [4] = {.index = 2, .length = 1},
  [5] = {.index = 3, .length = 2},
  [6] = {.index = 5, .length = 1},
  [7] = {.index = 6, .length = 2},
  [8] = {.index = 8, .length = 3},
  [9] = {.index = 11, .length = 1},
  [10] = {.index = 12, .length = 1},
  [11] = {.index = 13, .length = 2},
  [12] = {.index = 15, .length = 2},
  [13] = {.index = 17, .length = 2},
  [14] = {.index = 19, .length = 1},
  [15] = {.index = 20, .length = 2},
  [16] = {.index = 22, .length = 1},
  [17] = {.index = 23, .length = 1},
  [18] = {.index = 24, .length = 2},
  [19] = {.index = 26, .length = 2},
  [20] = {.index = 28, .length = 2},
  [21] = {.index = 30, .length = 2},
  [22] = {.index = 32, .length = 3},
  [23] = {.index = 35, .length = 3},
};

static const TSFieldMapEntry ts_field_map_entries[] = {
  [0] =
    {field_number, 1},
  [1] =
    {field_path, 1},
  [2] =
    {field_name, 1},
  [3] =
    {field_name, 1},
    {field_parent, 3},
  [5] =
    {field_name, 0},
  [6] =
    {field_name, 0},
    {field_value, 2},
  [8] =
    {field_metric, 0},
    {field_operator, 1},
    {field_threshold, 2},
  [11] =
    {field_condition, 1},
  [12] =
    {field_unit, 1},
  [13] =
    {field_kind, 0},
    {field_label, 1},
  [15] =
    {field_kind, 0},
    {field_selector, 1},
  [17] =
    {field_edge, 1},
    {field_kind, 0},
  [19] =
    {field_allocation, 1},
  [20] =
    {field_first, 0},
    {field_last, 2},
  [22] =
    {field_function, 0},
  [23] =
    {field_fallback, 2},
  [24] =
    {field_condition, 1},
    {field_duration, 3},
  [26] =
    {field_block, 0},
    {field_name, 2},
  [28] =
    {field_target, 0},
    {field_value, 2},
  [30] =
    {field_alternative, 2},
    {field_condition, 4},
  [32] =
    {field_event, 0},
    {field_source, 2},
    {field_target, 4},
  [35] =
    {field_alternative, 4},
    {field_condition, 6},
    {field_fallback, 2},
};

static const TSSymbol ts_alias_sequences[PRODUCTION_ID_COUNT][MAX_ALIAS_SEQUENCE_LENGTH] = {
  [0] = {0},
  [3] = {
    [0] = sym_name,
  },
};

static const uint16_t ts_non_terminal_alias_map[] = {
  0,
};

static const TSStateId ts_primary_state_ids[STATE_COUNT] = {
  [0] = 0,
  [1] = 1,
  [2] = 2,
  [3] = 2,
  [4] = 4,
  [5] = 5,
  [6] = 2,
  [7] = 7,
  [8] = 8,
  [9] = 9,
  [10] = 10,
  [11] = 11,
  [12] = 12,
  [13] = 13,
  [14] = 14,
  [15] = 15,
  [16] = 16,
  [17] = 17,
  [18] = 18,
  [19] = 19,
  [20] = 20,
  [21] = 21,
  [22] = 22,
  [23] = 23,
  [24] = 24,
  [25] = 25,
  [26] = 26,
  [27] = 27,
  [28] = 28,
  [29] = 29,
  [30] = 30,
  [31] = 31,
  [32] = 32,
  [33] = 33,
  [34] = 34,
  [35] = 35,
  [36] = 36,
  [37] = 37,
  [38] = 38,
  [39] = 39,
  [40] = 40,
  [41] = 41,
  [42] = 42,
  [43] = 43,
  [44] = 44,
  [45] = 45,
  [46] = 46,
  [47] = 47,
  [48] = 48,
  [49] = 49,
  [50] = 50,
  [51] = 51,
  [52] = 52,
  [53] = 53,
  [54] = 54,
  [55] = 55,
  [56] = 56,
  [57] = 57,
  [58] = 58,
  [59] = 59,
  [60] = 60,
  [61] = 61,
  [62] = 62,
  [63] = 63,
  [64] = 64,
  [65] = 65,
  [66] = 66,
  [67] = 67,
  [68] = 68,
  [69] = 69,
  [70] = 70,
  [71] = 71,
  [72] = 72,
  [73] = 73,
  [74] = 74,
  [75] = 75,
  [76] = 76,
  [77] = 77,
  [78] = 78,
  [79] = 79,
  [80] = 80,
  [81] = 81,
  [82] = 82,
  [83] = 83,
  [84] = 84,
  [85] = 85,
  [86] = 86,
  [87] = 87,
  [88] = 88,
  [89] = 89,
  [90] = 90,
  [91] = 91,
  [92] = 92,
  [93] = 93,
  [94] = 94,
  [95] = 95,
  [96] = 96,
  [97] = 97,
  [98] = 98,
  [99] = 99,
  [100] = 100,
  [101] = 101,
  [102] = 102,
  [103] = 103,
  [104] = 104,
  [105] = 105,
  [106] = 106,
  [107] = 107,
  [108] = 108,
  [109] = 109,
  [110] = 110,
  [111] = 111,
  [112] = 112,
  [113] = 113,
  [114] = 114,
  [115] = 115,
  [116] = 116,
  [117] = 117,
  [118] = 118,
  [119] = 119,
  [120] = 120,
  [121] = 121,
  [122] = 122,
  [123] = 123,
};

static bool ts_lex(TSLexer *lexer, TSStateId state) {
  START_LEXER();
  eof = lexer->eof(lexer);
  switch (state) {
    case 0:
      if (eof) ADVANCE(22);
      ADVANCE_MAP(
        '!', 12,
        '"', 4,
        '#', 24,
        '(', 29,
        ')', 31,
        ',', 39,
        '-', 7,
        '.', 50,
        ':', 33,
        ';', 23,
        '<', 43,
        '=', 28,
        '>', 44,
        '[', 41,
        ']', 42,
        '{', 25,
        '|', 32,
        '}', 26,
      );
      if (('\t' <= lookahead && lookahead <= '\r') ||
          lookahead == ' ') SKIP(0);
      if (('0' <= lookahead && lookahead <= '9')) ADVANCE(53);
      if (('A' <= lookahead && lookahead <= 'Z') ||
          lookahead == '_' ||
          ('a' <= lookahead && lookahead <= 'z')) ADVANCE(58);
      END_STATE();
    case 1:
      ADVANCE_MAP(
        '!', 12,
        '#', 24,
        ')', 31,
        ',', 39,
        '-', 9,
        '.', 10,
        ':', 33,
        ';', 23,
        '<', 43,
        '=', 13,
        '>', 44,
        ']', 42,
        '{', 25,
        '|', 32,
        '}', 26,
      );
      if (('\t' <= lookahead && lookahead <= '\r') ||
          lookahead == ' ') SKIP(1);
      if (('0' <= lookahead && lookahead <= '9')) ADVANCE(51);
      if (('A' <= lookahead && lookahead <= 'Z') ||
          lookahead == '_' ||
          ('a' <= lookahead && lookahead <= 'z')) ADVANCE(58);
      END_STATE();
    case 2:
      ADVANCE_MAP(
        '!', 12,
        '#', 24,
        ')', 31,
        ',', 39,
        '-', 9,
        '.', 10,
        ':', 33,
        ';', 23,
        '<', 43,
        '=', 13,
        '>', 44,
        ']', 42,
        '{', 25,
        '|', 32,
        '}', 26,
      );
      if (('\t' <= lookahead && lookahead <= '\r') ||
          lookahead == ' ') SKIP(1);
      if (('0' <= lookahead && lookahead <= '9')) ADVANCE(51);
      if (('A' <= lookahead && lookahead <= 'Z') ||
          lookahead == '_' ||
          ('a' <= lookahead && lookahead <= 'z')) ADVANCE(40);
      END_STATE();
    case 3:
      ADVANCE_MAP(
        '"', 4,
        '#', 24,
        '(', 29,
        '-', 8,
        '.', 16,
        '=', 27,
        '[', 41,
        ']', 42,
        '{', 25,
      );
      if (('\t' <= lookahead && lookahead <= '\r') ||
          lookahead == ' ') SKIP(3);
      if (('0' <= lookahead && lookahead <= '9')) ADVANCE(53);
      if (('A' <= lookahead && lookahead <= 'Z') ||
          lookahead == '_' ||
          ('a' <= lookahead && lookahead <= 'z')) ADVANCE(57);
      END_STATE();
    case 4:
      if (lookahead == '"') ADVANCE(56);
      if (lookahead == '\\') ADVANCE(21);
      if (lookahead != 0 &&
          lookahead != '\n') ADVANCE(4);
      END_STATE();
    case 5:
      if (lookahead == '#') ADVANCE(24);
      if (lookahead == '.') ADVANCE(49);
      if (lookahead == '=') ADVANCE(27);
      if (('\t' <= lookahead && lookahead <= '\r') ||
          lookahead == ' ') SKIP(5);
      if (('A' <= lookahead && lookahead <= 'Z') ||
          lookahead == '_' ||
          ('a' <= lookahead && lookahead <= 'z')) ADVANCE(58);
      END_STATE();
    case 6:
      if (lookahead == '-') ADVANCE(11);
      if (lookahead == '.') ADVANCE(18);
      if (lookahead == '\t' ||
          lookahead == ' ') ADVANCE(6);
      if (('0' <= lookahead && lookahead <= '9')) ADVANCE(34);
      END_STATE();
    case 7:
      if (lookahead == '.') ADVANCE(16);
      if (lookahead == '>') ADVANCE(30);
      if (('0' <= lookahead && lookahead <= '9')) ADVANCE(53);
      END_STATE();
    case 8:
      if (lookahead == '.') ADVANCE(16);
      if (('0' <= lookahead && lookahead <= '9')) ADVANCE(53);
      END_STATE();
    case 9:
      if (lookahead == '.') ADVANCE(16);
      if (('0' <= lookahead && lookahead <= '9')) ADVANCE(51);
      END_STATE();
    case 10:
      if (lookahead == '.') ADVANCE(37);
      if (('0' <= lookahead && lookahead <= '9')) ADVANCE(54);
      END_STATE();
    case 11:
      if (lookahead == '.') ADVANCE(18);
      if (('0' <= lookahead && lookahead <= '9')) ADVANCE(34);
      END_STATE();
    case 12:
      if (lookahead == '=') ADVANCE(47);
      END_STATE();
    case 13:
      if (lookahead == '=') ADVANCE(48);
      END_STATE();
    case 14:
      if (lookahead == '+' ||
          lookahead == '-') ADVANCE(17);
      if (('0' <= lookahead && lookahead <= '9')) ADVANCE(55);
      END_STATE();
    case 15:
      if (lookahead == '+' ||
          lookahead == '-') ADVANCE(19);
      if (('0' <= lookahead && lookahead <= '9')) ADVANCE(36);
      END_STATE();
    case 16:
      if (('0' <= lookahead && lookahead <= '9')) ADVANCE(54);
      END_STATE();
    case 17:
      if (('0' <= lookahead && lookahead <= '9')) ADVANCE(55);
      END_STATE();
    case 18:
      if (('0' <= lookahead && lookahead <= '9')) ADVANCE(35);
      END_STATE();
    case 19:
      if (('0' <= lookahead && lookahead <= '9')) ADVANCE(36);
      END_STATE();
    case 20:
      if (('0' <= lookahead && lookahead <= '9')) ADVANCE(38);
      END_STATE();
    case 21:
      if (lookahead != 0 &&
          lookahead != '\n') ADVANCE(4);
      END_STATE();
    case 22:
      ACCEPT_TOKEN(ts_builtin_sym_end);
      END_STATE();
    case 23:
      ACCEPT_TOKEN(anon_sym_SEMI);
      END_STATE();
    case 24:
      ACCEPT_TOKEN(sym_comment);
      if (lookahead != 0 &&
          lookahead != '\n') ADVANCE(24);
      END_STATE();
    case 25:
      ACCEPT_TOKEN(anon_sym_LBRACE);
      END_STATE();
    case 26:
      ACCEPT_TOKEN(anon_sym_RBRACE);
      END_STATE();
    case 27:
      ACCEPT_TOKEN(anon_sym_EQ);
      END_STATE();
    case 28:
      ACCEPT_TOKEN(anon_sym_EQ);
      if (lookahead == '=') ADVANCE(48);
      END_STATE();
    case 29:
      ACCEPT_TOKEN(anon_sym_LPAREN);
      END_STATE();
    case 30:
      ACCEPT_TOKEN(anon_sym_DASH_GT);
      END_STATE();
    case 31:
      ACCEPT_TOKEN(anon_sym_RPAREN);
      END_STATE();
    case 32:
      ACCEPT_TOKEN(anon_sym_PIPE);
      END_STATE();
    case 33:
      ACCEPT_TOKEN(anon_sym_COLON);
      END_STATE();
    case 34:
      ACCEPT_TOKEN(aux_sym_range_token1);
      if (lookahead == '.') ADVANCE(35);
      if (lookahead == 'E' ||
          lookahead == 'e') ADVANCE(15);
      if (('0' <= lookahead && lookahead <= '9')) ADVANCE(34);
      END_STATE();
    case 35:
      ACCEPT_TOKEN(aux_sym_range_token1);
      if (lookahead == 'E' ||
          lookahead == 'e') ADVANCE(15);
      if (('0' <= lookahead && lookahead <= '9')) ADVANCE(35);
      END_STATE();
    case 36:
      ACCEPT_TOKEN(aux_sym_range_token1);
      if (('0' <= lookahead && lookahead <= '9')) ADVANCE(36);
      END_STATE();
    case 37:
      ACCEPT_TOKEN(anon_sym_DOT_DOT);
      END_STATE();
    case 38:
      ACCEPT_TOKEN(sym_device);
      if (('0' <= lookahead && lookahead <= '9')) ADVANCE(38);
      END_STATE();
    case 39:
      ACCEPT_TOKEN(anon_sym_COMMA);
      END_STATE();
    case 40:
      ACCEPT_TOKEN(aux_sym_unit_token1);
      if (('0' <= lookahead && lookahead <= '9') ||
          ('A' <= lookahead && lookahead <= 'Z') ||
          lookahead == '_' ||
          ('a' <= lookahead && lookahead <= 'z')) ADVANCE(40);
      END_STATE();
    case 41:
      ACCEPT_TOKEN(anon_sym_LBRACK);
      END_STATE();
    case 42:
      ACCEPT_TOKEN(anon_sym_RBRACK);
      END_STATE();
    case 43:
      ACCEPT_TOKEN(anon_sym_LT);
      if (lookahead == '=') ADVANCE(45);
      END_STATE();
    case 44:
      ACCEPT_TOKEN(anon_sym_GT);
      if (lookahead == '=') ADVANCE(46);
      END_STATE();
    case 45:
      ACCEPT_TOKEN(anon_sym_LT_EQ);
      END_STATE();
    case 46:
      ACCEPT_TOKEN(anon_sym_GT_EQ);
      END_STATE();
    case 47:
      ACCEPT_TOKEN(anon_sym_BANG_EQ);
      END_STATE();
    case 48:
      ACCEPT_TOKEN(anon_sym_EQ_EQ);
      END_STATE();
    case 49:
      ACCEPT_TOKEN(anon_sym_DOT);
      END_STATE();
    case 50:
      ACCEPT_TOKEN(anon_sym_DOT);
      if (lookahead == '.') ADVANCE(37);
      if (('0' <= lookahead && lookahead <= '9')) ADVANCE(54);
      END_STATE();
    case 51:
      ACCEPT_TOKEN(sym_number);
      if (lookahead == '.') ADVANCE(54);
      if (lookahead == 'E' ||
          lookahead == 'e') ADVANCE(14);
      if (('0' <= lookahead && lookahead <= '9')) ADVANCE(51);
      END_STATE();
    case 52:
      ACCEPT_TOKEN(sym_number);
      if (lookahead == '.') ADVANCE(6);
      if (lookahead == 'E' ||
          lookahead == 'e') ADVANCE(14);
      if (('0' <= lookahead && lookahead <= '9')) ADVANCE(54);
      END_STATE();
    case 53:
      ACCEPT_TOKEN(sym_number);
      if (lookahead == '.') ADVANCE(52);
      if (lookahead == 'E' ||
          lookahead == 'e') ADVANCE(14);
      if (('0' <= lookahead && lookahead <= '9')) ADVANCE(53);
      END_STATE();
    case 54:
      ACCEPT_TOKEN(sym_number);
      if (lookahead == 'E' ||
          lookahead == 'e') ADVANCE(14);
      if (('0' <= lookahead && lookahead <= '9')) ADVANCE(54);
      END_STATE();
    case 55:
      ACCEPT_TOKEN(sym_number);
      if (('0' <= lookahead && lookahead <= '9')) ADVANCE(55);
      END_STATE();
    case 56:
      ACCEPT_TOKEN(sym_string);
      END_STATE();
    case 57:
      ACCEPT_TOKEN(sym_name);
      if (lookahead == ':') ADVANCE(20);
      if (('0' <= lookahead && lookahead <= '9') ||
          ('A' <= lookahead && lookahead <= 'Z') ||
          lookahead == '_' ||
          ('a' <= lookahead && lookahead <= 'z')) ADVANCE(57);
      END_STATE();
    case 58:
      ACCEPT_TOKEN(sym_name);
      if (('0' <= lookahead && lookahead <= '9') ||
          ('A' <= lookahead && lookahead <= 'Z') ||
          lookahead == '_' ||
          ('a' <= lookahead && lookahead <= 'z')) ADVANCE(58);
      END_STATE();
    default:
      return false;
  }
}

static bool ts_lex_keywords(TSLexer *lexer, TSStateId state) {
  START_LEXER();
  eof = lexer->eof(lexer);
  switch (state) {
    case 0:
      ADVANCE_MAP(
        'G', 1,
        'M', 2,
        'a', 3,
        'e', 4,
        'f', 5,
        'i', 6,
        'm', 7,
        'p', 8,
        'r', 9,
        's', 10,
        't', 11,
        'u', 12,
        'v', 13,
        'w', 14,
      );
      if (('\t' <= lookahead && lookahead <= '\r') ||
          lookahead == ' ') SKIP(0);
      END_STATE();
    case 1:
      if (lookahead == 'B') ADVANCE(15);
      if (lookahead == 'i') ADVANCE(16);
      END_STATE();
    case 2:
      if (lookahead == 'B') ADVANCE(17);
      if (lookahead == 'i') ADVANCE(18);
      END_STATE();
    case 3:
      if (lookahead == 'c') ADVANCE(19);
      END_STATE();
    case 4:
      if (lookahead == 'x') ADVANCE(20);
      END_STATE();
    case 5:
      if (lookahead == 'a') ADVANCE(21);
      if (lookahead == 'o') ADVANCE(22);
      END_STATE();
    case 6:
      if (lookahead == 'm') ADVANCE(23);
      END_STATE();
    case 7:
      if (lookahead == 's') ADVANCE(24);
      END_STATE();
    case 8:
      if (lookahead == 'o') ADVANCE(25);
      END_STATE();
    case 9:
      if (lookahead == 'e') ADVANCE(26);
      END_STATE();
    case 10:
      if (lookahead == 't') ADVANCE(27);
      END_STATE();
    case 11:
      if (lookahead == 'o') ADVANCE(28);
      if (lookahead == 'r') ADVANCE(29);
      END_STATE();
    case 12:
      if (lookahead == 's') ADVANCE(30);
      END_STATE();
    case 13:
      if (lookahead == 'e') ADVANCE(31);
      END_STATE();
    case 14:
      if (lookahead == 'h') ADVANCE(32);
      END_STATE();
    case 15:
      ACCEPT_TOKEN(anon_sym_GB);
      END_STATE();
    case 16:
      if (lookahead == 'B') ADVANCE(33);
      END_STATE();
    case 17:
      ACCEPT_TOKEN(anon_sym_MB);
      END_STATE();
    case 18:
      if (lookahead == 'B') ADVANCE(34);
      END_STATE();
    case 19:
      if (lookahead == 'c') ADVANCE(35);
      END_STATE();
    case 20:
      if (lookahead == 't') ADVANCE(36);
      END_STATE();
    case 21:
      if (lookahead == 'l') ADVANCE(37);
      END_STATE();
    case 22:
      if (lookahead == 'r') ADVANCE(38);
      END_STATE();
    case 23:
      if (lookahead == 'p') ADVANCE(39);
      END_STATE();
    case 24:
      ACCEPT_TOKEN(anon_sym_ms);
      END_STATE();
    case 25:
      if (lookahead == 'l') ADVANCE(40);
      END_STATE();
    case 26:
      if (lookahead == 'b') ADVANCE(41);
      END_STATE();
    case 27:
      if (lookahead == 'e') ADVANCE(42);
      END_STATE();
    case 28:
      if (lookahead == 'k') ADVANCE(43);
      END_STATE();
    case 29:
      if (lookahead == 'i') ADVANCE(44);
      if (lookahead == 'u') ADVANCE(45);
      END_STATE();
    case 30:
      ACCEPT_TOKEN(anon_sym_us);
      END_STATE();
    case 31:
      if (lookahead == 'r') ADVANCE(46);
      END_STATE();
    case 32:
      if (lookahead == 'e') ADVANCE(47);
      END_STATE();
    case 33:
      ACCEPT_TOKEN(anon_sym_GiB);
      END_STATE();
    case 34:
      ACCEPT_TOKEN(anon_sym_MiB);
      END_STATE();
    case 35:
      if (lookahead == 'e') ADVANCE(48);
      END_STATE();
    case 36:
      if (lookahead == 'e') ADVANCE(49);
      END_STATE();
    case 37:
      if (lookahead == 's') ADVANCE(50);
      END_STATE();
    case 38:
      ACCEPT_TOKEN(anon_sym_for);
      END_STATE();
    case 39:
      if (lookahead == 'o') ADVANCE(51);
      END_STATE();
    case 40:
      if (lookahead == 'i') ADVANCE(52);
      END_STATE();
    case 41:
      if (lookahead == 'a') ADVANCE(53);
      END_STATE();
    case 42:
      if (lookahead == 'p') ADVANCE(54);
      END_STATE();
    case 43:
      if (lookahead == 'e') ADVANCE(55);
      END_STATE();
    case 44:
      if (lookahead == 'g') ADVANCE(56);
      END_STATE();
    case 45:
      if (lookahead == 'e') ADVANCE(57);
      END_STATE();
    case 46:
      if (lookahead == 's') ADVANCE(58);
      END_STATE();
    case 47:
      if (lookahead == 'n') ADVANCE(59);
      END_STATE();
    case 48:
      if (lookahead == 's') ADVANCE(60);
      END_STATE();
    case 49:
      if (lookahead == 'n') ADVANCE(61);
      END_STATE();
    case 50:
      if (lookahead == 'e') ADVANCE(62);
      END_STATE();
    case 51:
      if (lookahead == 'r') ADVANCE(63);
      END_STATE();
    case 52:
      if (lookahead == 'c') ADVANCE(64);
      END_STATE();
    case 53:
      if (lookahead == 'l') ADVANCE(65);
      END_STATE();
    case 54:
      if (lookahead == 's') ADVANCE(66);
      END_STATE();
    case 55:
      if (lookahead == 'n') ADVANCE(67);
      END_STATE();
    case 56:
      if (lookahead == 'g') ADVANCE(68);
      END_STATE();
    case 57:
      ACCEPT_TOKEN(anon_sym_true);
      END_STATE();
    case 58:
      if (lookahead == 'i') ADVANCE(69);
      END_STATE();
    case 59:
      ACCEPT_TOKEN(anon_sym_when);
      END_STATE();
    case 60:
      if (lookahead == 's') ADVANCE(70);
      END_STATE();
    case 61:
      if (lookahead == 'd') ADVANCE(71);
      END_STATE();
    case 62:
      ACCEPT_TOKEN(anon_sym_false);
      END_STATE();
    case 63:
      if (lookahead == 't') ADVANCE(72);
      END_STATE();
    case 64:
      if (lookahead == 'y') ADVANCE(73);
      END_STATE();
    case 65:
      if (lookahead == 'a') ADVANCE(74);
      END_STATE();
    case 66:
      ACCEPT_TOKEN(anon_sym_steps);
      END_STATE();
    case 67:
      if (lookahead == 's') ADVANCE(75);
      END_STATE();
    case 68:
      if (lookahead == 'e') ADVANCE(76);
      END_STATE();
    case 69:
      if (lookahead == 'o') ADVANCE(77);
      END_STATE();
    case 70:
      if (lookahead == 'e') ADVANCE(78);
      END_STATE();
    case 71:
      if (lookahead == 's') ADVANCE(79);
      END_STATE();
    case 72:
      ACCEPT_TOKEN(anon_sym_import);
      END_STATE();
    case 73:
      ACCEPT_TOKEN(anon_sym_policy);
      END_STATE();
    case 74:
      if (lookahead == 'n') ADVANCE(80);
      END_STATE();
    case 75:
      ACCEPT_TOKEN(anon_sym_tokens);
      END_STATE();
    case 76:
      if (lookahead == 'r') ADVANCE(81);
      END_STATE();
    case 77:
      if (lookahead == 'n') ADVANCE(82);
      END_STATE();
    case 78:
      if (lookahead == 's') ADVANCE(83);
      END_STATE();
    case 79:
      ACCEPT_TOKEN(anon_sym_extends);
      END_STATE();
    case 80:
      if (lookahead == 'c') ADVANCE(84);
      END_STATE();
    case 81:
      ACCEPT_TOKEN(anon_sym_trigger);
      END_STATE();
    case 82:
      ACCEPT_TOKEN(anon_sym_version);
      END_STATE();
    case 83:
      ACCEPT_TOKEN(anon_sym_accesses);
      END_STATE();
    case 84:
      if (lookahead == 'e') ADVANCE(85);
      END_STATE();
    case 85:
      ACCEPT_TOKEN(anon_sym_rebalance);
      END_STATE();
    default:
      return false;
  }
}

static const TSLexMode ts_lex_modes[STATE_COUNT] = {
  [0] = {.lex_state = 0},
  [1] = {.lex_state = 0},
  [2] = {.lex_state = 2},
  [3] = {.lex_state = 2},
  [4] = {.lex_state = 3},
  [5] = {.lex_state = 3},
  [6] = {.lex_state = 2},
  [7] = {.lex_state = 3},
  [8] = {.lex_state = 3},
  [9] = {.lex_state = 3},
  [10] = {.lex_state = 3},
  [11] = {.lex_state = 3},
  [12] = {.lex_state = 3},
  [13] = {.lex_state = 3},
  [14] = {.lex_state = 0},
  [15] = {.lex_state = 0},
  [16] = {.lex_state = 0},
  [17] = {.lex_state = 0},
  [18] = {.lex_state = 0},
  [19] = {.lex_state = 2},
  [20] = {.lex_state = 0},
  [21] = {.lex_state = 0},
  [22] = {.lex_state = 0},
  [23] = {.lex_state = 0},
  [24] = {.lex_state = 0},
  [25] = {.lex_state = 0},
  [26] = {.lex_state = 0},
  [27] = {.lex_state = 0},
  [28] = {.lex_state = 0},
  [29] = {.lex_state = 0},
  [30] = {.lex_state = 0},
  [31] = {.lex_state = 0},
  [32] = {.lex_state = 0},
  [33] = {.lex_state = 0},
  [34] = {.lex_state = 0},
  [35] = {.lex_state = 0},
  [36] = {.lex_state = 0},
  [37] = {.lex_state = 0},
  [38] = {.lex_state = 0},
  [39] = {.lex_state = 0},
  [40] = {.lex_state = 0},
  [41] = {.lex_state = 0},
  [42] = {.lex_state = 0},
  [43] = {.lex_state = 0},
  [44] = {.lex_state = 0},
  [45] = {.lex_state = 2},
  [46] = {.lex_state = 0},
  [47] = {.lex_state = 0},
  [48] = {.lex_state = 0},
  [49] = {.lex_state = 0},
  [50] = {.lex_state = 0},
  [51] = {.lex_state = 0},
  [52] = {.lex_state = 0},
  [53] = {.lex_state = 0},
  [54] = {.lex_state = 0},
  [55] = {.lex_state = 0},
  [56] = {.lex_state = 0},
  [57] = {.lex_state = 0},
  [58] = {.lex_state = 0},
  [59] = {.lex_state = 0},
  [60] = {.lex_state = 0},
  [61] = {.lex_state = 0},
  [62] = {.lex_state = 0},
  [63] = {.lex_state = 0},
  [64] = {.lex_state = 0},
  [65] = {.lex_state = 0},
  [66] = {.lex_state = 0},
  [67] = {.lex_state = 0},
  [68] = {.lex_state = 0},
  [69] = {.lex_state = 0},
  [70] = {.lex_state = 0},
  [71] = {.lex_state = 5},
  [72] = {.lex_state = 0},
  [73] = {.lex_state = 0},
  [74] = {.lex_state = 0},
  [75] = {.lex_state = 0},
  [76] = {.lex_state = 0},
  [77] = {.lex_state = 0},
  [78] = {.lex_state = 0},
  [79] = {.lex_state = 3},
  [80] = {.lex_state = 0},
  [81] = {.lex_state = 0},
  [82] = {.lex_state = 0},
  [83] = {.lex_state = 0},
  [84] = {.lex_state = 0},
  [85] = {.lex_state = 0},
  [86] = {.lex_state = 0},
  [87] = {.lex_state = 0},
  [88] = {.lex_state = 2},
  [89] = {.lex_state = 0},
  [90] = {.lex_state = 5},
  [91] = {.lex_state = 0},
  [92] = {.lex_state = 0},
  [93] = {.lex_state = 0},
  [94] = {.lex_state = 0},
  [95] = {.lex_state = 0},
  [96] = {.lex_state = 0},
  [97] = {.lex_state = 0},
  [98] = {.lex_state = 0},
  [99] = {.lex_state = 0},
  [100] = {.lex_state = 0},
  [101] = {.lex_state = 0},
  [102] = {.lex_state = 2},
  [103] = {.lex_state = 0},
  [104] = {.lex_state = 0},
  [105] = {.lex_state = 0},
  [106] = {.lex_state = 0},
  [107] = {.lex_state = 0},
  [108] = {.lex_state = 2},
  [109] = {.lex_state = 0},
  [110] = {.lex_state = 3},
  [111] = {.lex_state = 0},
  [112] = {.lex_state = 0},
  [113] = {.lex_state = 0},
  [114] = {.lex_state = 0},
  [115] = {.lex_state = 0},
  [116] = {.lex_state = 2},
  [117] = {.lex_state = 0},
  [118] = {.lex_state = 0},
  [119] = {.lex_state = 0},
  [120] = {.lex_state = 3},
  [121] = {.lex_state = 2},
  [122] = {.lex_state = 0},
  [123] = {.lex_state = 3},
};

static const uint16_t ts_parse_table[LARGE_STATE_COUNT][SYMBOL_COUNT] = {
  [0] = {
    [ts_builtin_sym_end] = ACTIONS(1),
    [sym_name] = ACTIONS(1),
    [anon_sym_SEMI] = ACTIONS(1),
    [sym_comment] = ACTIONS(3),
    [anon_sym_version] = ACTIONS(1),
    [anon_sym_import] = ACTIONS(1),
    [anon_sym_policy] = ACTIONS(1),
    [anon_sym_extends] = ACTIONS(1),
    [anon_sym_when] = ACTIONS(1),
    [anon_sym_for] = ACTIONS(1),
    [anon_sym_trigger] = ACTIONS(1),
    [anon_sym_rebalance] = ACTIONS(1),
    [anon_sym_true] = ACTIONS(1),
    [anon_sym_false] = ACTIONS(1),
    [anon_sym_LBRACE] = ACTIONS(1),
    [anon_sym_RBRACE] = ACTIONS(1),
    [anon_sym_EQ] = ACTIONS(1),
    [anon_sym_LPAREN] = ACTIONS(1),
    [anon_sym_DASH_GT] = ACTIONS(1),
    [anon_sym_RPAREN] = ACTIONS(1),
    [anon_sym_PIPE] = ACTIONS(1),
    [anon_sym_COLON] = ACTIONS(1),
    [aux_sym_range_token1] = ACTIONS(1),
    [anon_sym_DOT_DOT] = ACTIONS(1),
    [anon_sym_COMMA] = ACTIONS(1),
    [anon_sym_accesses] = ACTIONS(1),
    [anon_sym_steps] = ACTIONS(1),
    [anon_sym_tokens] = ACTIONS(1),
    [anon_sym_GB] = ACTIONS(1),
    [anon_sym_GiB] = ACTIONS(1),
    [anon_sym_MB] = ACTIONS(1),
    [anon_sym_MiB] = ACTIONS(1),
    [anon_sym_ms] = ACTIONS(1),
    [anon_sym_us] = ACTIONS(1),
    [anon_sym_LBRACK] = ACTIONS(1),
    [anon_sym_RBRACK] = ACTIONS(1),
    [anon_sym_LT] = ACTIONS(1),
    [anon_sym_GT] = ACTIONS(1),
    [anon_sym_LT_EQ] = ACTIONS(1),
    [anon_sym_GT_EQ] = ACTIONS(1),
    [anon_sym_BANG_EQ] = ACTIONS(1),
    [anon_sym_EQ_EQ] = ACTIONS(1),
    [anon_sym_DOT] = ACTIONS(1),
    [sym_number] = ACTIONS(1),
    [sym_string] = ACTIONS(1),
  },
  [1] = {
    [sym_source_file] = STATE(100),
    [sym_version] = STATE(34),
    [sym_import] = STATE(34),
    [sym_policy] = STATE(34),
    [aux_sym_source_file_repeat1] = STATE(34),
    [ts_builtin_sym_end] = ACTIONS(5),
    [anon_sym_SEMI] = ACTIONS(7),
    [sym_comment] = ACTIONS(3),
    [anon_sym_version] = ACTIONS(9),
    [anon_sym_import] = ACTIONS(11),
    [anon_sym_policy] = ACTIONS(13),
  },
};

static const uint16_t ts_small_parse_table[] = {
  [0] = 6,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(19), 1,
      anon_sym_DOT_DOT,
    STATE(22), 1,
      sym_unit,
    ACTIONS(15), 2,
      anon_sym_when,
      sym_name,
    ACTIONS(17), 4,
      anon_sym_SEMI,
      anon_sym_RBRACE,
      anon_sym_PIPE,
      anon_sym_COLON,
    ACTIONS(21), 10,
      aux_sym_unit_token1,
      anon_sym_accesses,
      anon_sym_steps,
      anon_sym_tokens,
      anon_sym_GB,
      anon_sym_GiB,
      anon_sym_MB,
      anon_sym_MiB,
      anon_sym_ms,
      anon_sym_us,
  [32] = 6,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(19), 1,
      anon_sym_DOT_DOT,
    STATE(22), 1,
      sym_unit,
    ACTIONS(17), 2,
      anon_sym_SEMI,
      anon_sym_RBRACE,
    ACTIONS(15), 3,
      anon_sym_trigger,
      anon_sym_rebalance,
      sym_name,
    ACTIONS(21), 10,
      aux_sym_unit_token1,
      anon_sym_accesses,
      anon_sym_steps,
      anon_sym_tokens,
      anon_sym_GB,
      anon_sym_GiB,
      anon_sym_MB,
      anon_sym_MiB,
      anon_sym_ms,
      anon_sym_us,
  [63] = 9,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(23), 1,
      sym_name,
    ACTIONS(27), 1,
      aux_sym_range_token1,
    ACTIONS(31), 1,
      anon_sym_LBRACK,
    ACTIONS(33), 1,
      anon_sym_RBRACK,
    ACTIONS(35), 1,
      sym_number,
    ACTIONS(25), 2,
      anon_sym_true,
      anon_sym_false,
    ACTIONS(29), 2,
      sym_device,
      sym_string,
    STATE(82), 7,
      sym__value,
      sym_range,
      sym_call,
      sym_quantity,
      sym_identifier,
      sym_boolean,
      sym_list,
  [99] = 9,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(23), 1,
      sym_name,
    ACTIONS(27), 1,
      aux_sym_range_token1,
    ACTIONS(31), 1,
      anon_sym_LBRACK,
    ACTIONS(39), 1,
      sym_number,
    STATE(74), 1,
      sym_expression,
    ACTIONS(25), 2,
      anon_sym_true,
      anon_sym_false,
    ACTIONS(37), 2,
      sym_device,
      sym_string,
    STATE(46), 7,
      sym__value,
      sym_range,
      sym_call,
      sym_quantity,
      sym_identifier,
      sym_boolean,
      sym_list,
  [135] = 5,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(19), 1,
      anon_sym_DOT_DOT,
    STATE(22), 1,
      sym_unit,
    ACTIONS(17), 4,
      anon_sym_LBRACE,
      anon_sym_RPAREN,
      anon_sym_COMMA,
      anon_sym_RBRACK,
    ACTIONS(21), 10,
      aux_sym_unit_token1,
      anon_sym_accesses,
      anon_sym_steps,
      anon_sym_tokens,
      anon_sym_GB,
      anon_sym_GiB,
      anon_sym_MB,
      anon_sym_MiB,
      anon_sym_ms,
      anon_sym_us,
  [163] = 8,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(23), 1,
      sym_name,
    ACTIONS(27), 1,
      aux_sym_range_token1,
    ACTIONS(31), 1,
      anon_sym_LBRACK,
    ACTIONS(35), 1,
      sym_number,
    ACTIONS(25), 2,
      anon_sym_true,
      anon_sym_false,
    ACTIONS(41), 2,
      sym_device,
      sym_string,
    STATE(87), 7,
      sym__value,
      sym_range,
      sym_call,
      sym_quantity,
      sym_identifier,
      sym_boolean,
      sym_list,
  [196] = 8,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(23), 1,
      sym_name,
    ACTIONS(27), 1,
      aux_sym_range_token1,
    ACTIONS(31), 1,
      anon_sym_LBRACK,
    ACTIONS(35), 1,
      sym_number,
    ACTIONS(25), 2,
      anon_sym_true,
      anon_sym_false,
    ACTIONS(43), 2,
      sym_device,
      sym_string,
    STATE(109), 7,
      sym__value,
      sym_range,
      sym_call,
      sym_quantity,
      sym_identifier,
      sym_boolean,
      sym_list,
  [229] = 8,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(23), 1,
      sym_name,
    ACTIONS(27), 1,
      aux_sym_range_token1,
    ACTIONS(31), 1,
      anon_sym_LBRACK,
    ACTIONS(39), 1,
      sym_number,
    ACTIONS(25), 2,
      anon_sym_true,
      anon_sym_false,
    ACTIONS(45), 2,
      sym_device,
      sym_string,
    STATE(57), 7,
      sym__value,
      sym_range,
      sym_call,
      sym_quantity,
      sym_identifier,
      sym_boolean,
      sym_list,
  [262] = 8,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(23), 1,
      sym_name,
    ACTIONS(27), 1,
      aux_sym_range_token1,
    ACTIONS(31), 1,
      anon_sym_LBRACK,
    ACTIONS(39), 1,
      sym_number,
    ACTIONS(25), 2,
      anon_sym_true,
      anon_sym_false,
    ACTIONS(47), 2,
      sym_device,
      sym_string,
    STATE(101), 7,
      sym__value,
      sym_range,
      sym_call,
      sym_quantity,
      sym_identifier,
      sym_boolean,
      sym_list,
  [295] = 8,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(23), 1,
      sym_name,
    ACTIONS(27), 1,
      aux_sym_range_token1,
    ACTIONS(31), 1,
      anon_sym_LBRACK,
    ACTIONS(51), 1,
      sym_number,
    ACTIONS(25), 2,
      anon_sym_true,
      anon_sym_false,
    ACTIONS(49), 2,
      sym_device,
      sym_string,
    STATE(58), 7,
      sym__value,
      sym_range,
      sym_call,
      sym_quantity,
      sym_identifier,
      sym_boolean,
      sym_list,
  [328] = 8,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(23), 1,
      sym_name,
    ACTIONS(27), 1,
      aux_sym_range_token1,
    ACTIONS(31), 1,
      anon_sym_LBRACK,
    ACTIONS(35), 1,
      sym_number,
    ACTIONS(25), 2,
      anon_sym_true,
      anon_sym_false,
    ACTIONS(53), 2,
      sym_device,
      sym_string,
    STATE(93), 7,
      sym__value,
      sym_range,
      sym_call,
      sym_quantity,
      sym_identifier,
      sym_boolean,
      sym_list,
  [361] = 8,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(23), 1,
      sym_name,
    ACTIONS(27), 1,
      aux_sym_range_token1,
    ACTIONS(31), 1,
      anon_sym_LBRACK,
    ACTIONS(39), 1,
      sym_number,
    ACTIONS(25), 2,
      anon_sym_true,
      anon_sym_false,
    ACTIONS(55), 2,
      sym_device,
      sym_string,
    STATE(117), 7,
      sym__value,
      sym_range,
      sym_call,
      sym_quantity,
      sym_identifier,
      sym_boolean,
      sym_list,
  [394] = 4,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(61), 1,
      anon_sym_LPAREN,
    ACTIONS(57), 4,
      anon_sym_when,
      anon_sym_trigger,
      anon_sym_rebalance,
      sym_name,
    ACTIONS(59), 8,
      anon_sym_SEMI,
      anon_sym_LBRACE,
      anon_sym_RBRACE,
      anon_sym_RPAREN,
      anon_sym_PIPE,
      anon_sym_COLON,
      anon_sym_COMMA,
      anon_sym_RBRACK,
  [417] = 4,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(63), 1,
      sym_name,
    STATE(89), 1,
      sym__policy_name,
    ACTIONS(65), 10,
      anon_sym_version,
      anon_sym_import,
      anon_sym_policy,
      anon_sym_extends,
      anon_sym_when,
      anon_sym_for,
      anon_sym_trigger,
      anon_sym_rebalance,
      anon_sym_true,
      anon_sym_false,
  [439] = 3,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(67), 4,
      anon_sym_when,
      anon_sym_trigger,
      anon_sym_rebalance,
      sym_name,
    ACTIONS(69), 8,
      anon_sym_SEMI,
      anon_sym_LBRACE,
      anon_sym_RBRACE,
      anon_sym_RPAREN,
      anon_sym_PIPE,
      anon_sym_COLON,
      anon_sym_COMMA,
      anon_sym_RBRACK,
  [459] = 3,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(71), 4,
      anon_sym_when,
      anon_sym_trigger,
      anon_sym_rebalance,
      sym_name,
    ACTIONS(73), 8,
      anon_sym_SEMI,
      anon_sym_LBRACE,
      anon_sym_RBRACE,
      anon_sym_RPAREN,
      anon_sym_PIPE,
      anon_sym_COLON,
      anon_sym_COMMA,
      anon_sym_RBRACK,
  [479] = 3,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(75), 4,
      anon_sym_when,
      anon_sym_trigger,
      anon_sym_rebalance,
      sym_name,
    ACTIONS(77), 8,
      anon_sym_SEMI,
      anon_sym_LBRACE,
      anon_sym_RBRACE,
      anon_sym_RPAREN,
      anon_sym_PIPE,
      anon_sym_COLON,
      anon_sym_COMMA,
      anon_sym_RBRACK,
  [499] = 4,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(17), 1,
      anon_sym_LBRACE,
    STATE(22), 1,
      sym_unit,
    ACTIONS(21), 10,
      aux_sym_unit_token1,
      anon_sym_accesses,
      anon_sym_steps,
      anon_sym_tokens,
      anon_sym_GB,
      anon_sym_GiB,
      anon_sym_MB,
      anon_sym_MiB,
      anon_sym_ms,
      anon_sym_us,
  [521] = 3,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(79), 4,
      anon_sym_when,
      anon_sym_trigger,
      anon_sym_rebalance,
      sym_name,
    ACTIONS(81), 8,
      anon_sym_SEMI,
      anon_sym_LBRACE,
      anon_sym_RBRACE,
      anon_sym_RPAREN,
      anon_sym_PIPE,
      anon_sym_COLON,
      anon_sym_COMMA,
      anon_sym_RBRACK,
  [541] = 3,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(83), 4,
      anon_sym_when,
      anon_sym_trigger,
      anon_sym_rebalance,
      sym_name,
    ACTIONS(85), 8,
      anon_sym_SEMI,
      anon_sym_LBRACE,
      anon_sym_RBRACE,
      anon_sym_RPAREN,
      anon_sym_PIPE,
      anon_sym_COLON,
      anon_sym_COMMA,
      anon_sym_RBRACK,
  [561] = 3,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(87), 4,
      anon_sym_when,
      anon_sym_trigger,
      anon_sym_rebalance,
      sym_name,
    ACTIONS(89), 8,
      anon_sym_SEMI,
      anon_sym_LBRACE,
      anon_sym_RBRACE,
      anon_sym_RPAREN,
      anon_sym_PIPE,
      anon_sym_COLON,
      anon_sym_COMMA,
      anon_sym_RBRACK,
  [581] = 3,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(91), 4,
      anon_sym_when,
      anon_sym_trigger,
      anon_sym_rebalance,
      sym_name,
    ACTIONS(93), 8,
      anon_sym_SEMI,
      anon_sym_LBRACE,
      anon_sym_RBRACE,
      anon_sym_RPAREN,
      anon_sym_PIPE,
      anon_sym_COLON,
      anon_sym_COMMA,
      anon_sym_RBRACK,
  [601] = 3,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(95), 4,
      anon_sym_when,
      anon_sym_trigger,
      anon_sym_rebalance,
      sym_name,
    ACTIONS(97), 8,
      anon_sym_SEMI,
      anon_sym_LBRACE,
      anon_sym_RBRACE,
      anon_sym_RPAREN,
      anon_sym_PIPE,
      anon_sym_COLON,
      anon_sym_COMMA,
      anon_sym_RBRACK,
  [621] = 3,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(99), 4,
      anon_sym_when,
      anon_sym_trigger,
      anon_sym_rebalance,
      sym_name,
    ACTIONS(101), 8,
      anon_sym_SEMI,
      anon_sym_LBRACE,
      anon_sym_RBRACE,
      anon_sym_RPAREN,
      anon_sym_PIPE,
      anon_sym_COLON,
      anon_sym_COMMA,
      anon_sym_RBRACK,
  [641] = 3,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(103), 4,
      anon_sym_when,
      anon_sym_trigger,
      anon_sym_rebalance,
      sym_name,
    ACTIONS(105), 8,
      anon_sym_SEMI,
      anon_sym_LBRACE,
      anon_sym_RBRACE,
      anon_sym_RPAREN,
      anon_sym_PIPE,
      anon_sym_COLON,
      anon_sym_COMMA,
      anon_sym_RBRACK,
  [661] = 4,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(107), 1,
      sym_name,
    STATE(122), 1,
      sym__policy_name,
    ACTIONS(65), 10,
      anon_sym_version,
      anon_sym_import,
      anon_sym_policy,
      anon_sym_extends,
      anon_sym_when,
      anon_sym_for,
      anon_sym_trigger,
      anon_sym_rebalance,
      anon_sym_true,
      anon_sym_false,
  [683] = 3,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(109), 4,
      anon_sym_when,
      anon_sym_trigger,
      anon_sym_rebalance,
      sym_name,
    ACTIONS(111), 8,
      anon_sym_SEMI,
      anon_sym_LBRACE,
      anon_sym_RBRACE,
      anon_sym_RPAREN,
      anon_sym_PIPE,
      anon_sym_COLON,
      anon_sym_COMMA,
      anon_sym_RBRACK,
  [703] = 8,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(113), 1,
      sym_name,
    ACTIONS(115), 1,
      anon_sym_SEMI,
    ACTIONS(117), 1,
      anon_sym_trigger,
    ACTIONS(119), 1,
      anon_sym_rebalance,
    ACTIONS(121), 1,
      anon_sym_RBRACE,
    STATE(120), 1,
      sym_target,
    STATE(30), 4,
      sym_set_action,
      sym_trigger_action,
      sym_rebalance_action,
      aux_sym_rule_repeat1,
  [731] = 8,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(113), 1,
      sym_name,
    ACTIONS(117), 1,
      anon_sym_trigger,
    ACTIONS(119), 1,
      anon_sym_rebalance,
    ACTIONS(123), 1,
      anon_sym_SEMI,
    ACTIONS(125), 1,
      anon_sym_RBRACE,
    STATE(120), 1,
      sym_target,
    STATE(33), 4,
      sym_set_action,
      sym_trigger_action,
      sym_rebalance_action,
      aux_sym_rule_repeat1,
  [759] = 8,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(113), 1,
      sym_name,
    ACTIONS(117), 1,
      anon_sym_trigger,
    ACTIONS(119), 1,
      anon_sym_rebalance,
    ACTIONS(123), 1,
      anon_sym_SEMI,
    ACTIONS(127), 1,
      anon_sym_RBRACE,
    STATE(120), 1,
      sym_target,
    STATE(33), 4,
      sym_set_action,
      sym_trigger_action,
      sym_rebalance_action,
      aux_sym_rule_repeat1,
  [787] = 8,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(113), 1,
      sym_name,
    ACTIONS(117), 1,
      anon_sym_trigger,
    ACTIONS(119), 1,
      anon_sym_rebalance,
    ACTIONS(129), 1,
      anon_sym_SEMI,
    ACTIONS(131), 1,
      anon_sym_RBRACE,
    STATE(120), 1,
      sym_target,
    STATE(31), 4,
      sym_set_action,
      sym_trigger_action,
      sym_rebalance_action,
      aux_sym_rule_repeat1,
  [815] = 8,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(133), 1,
      sym_name,
    ACTIONS(136), 1,
      anon_sym_SEMI,
    ACTIONS(139), 1,
      anon_sym_trigger,
    ACTIONS(142), 1,
      anon_sym_rebalance,
    ACTIONS(145), 1,
      anon_sym_RBRACE,
    STATE(120), 1,
      sym_target,
    STATE(33), 4,
      sym_set_action,
      sym_trigger_action,
      sym_rebalance_action,
      aux_sym_rule_repeat1,
  [843] = 7,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(9), 1,
      anon_sym_version,
    ACTIONS(11), 1,
      anon_sym_import,
    ACTIONS(13), 1,
      anon_sym_policy,
    ACTIONS(147), 1,
      ts_builtin_sym_end,
    ACTIONS(149), 1,
      anon_sym_SEMI,
    STATE(35), 4,
      sym_version,
      sym_import,
      sym_policy,
      aux_sym_source_file_repeat1,
  [868] = 7,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(151), 1,
      ts_builtin_sym_end,
    ACTIONS(153), 1,
      anon_sym_SEMI,
    ACTIONS(156), 1,
      anon_sym_version,
    ACTIONS(159), 1,
      anon_sym_import,
    ACTIONS(162), 1,
      anon_sym_policy,
    STATE(35), 4,
      sym_version,
      sym_import,
      sym_policy,
      aux_sym_source_file_repeat1,
  [893] = 6,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(165), 1,
      sym_name,
    ACTIONS(167), 1,
      anon_sym_SEMI,
    ACTIONS(169), 1,
      anon_sym_when,
    ACTIONS(171), 1,
      anon_sym_RBRACE,
    STATE(38), 4,
      sym_param,
      sym_item,
      sym_rule,
      aux_sym_block_repeat1,
  [915] = 6,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(165), 1,
      sym_name,
    ACTIONS(169), 1,
      anon_sym_when,
    ACTIONS(173), 1,
      anon_sym_SEMI,
    ACTIONS(175), 1,
      anon_sym_RBRACE,
    STATE(36), 4,
      sym_param,
      sym_item,
      sym_rule,
      aux_sym_block_repeat1,
  [937] = 6,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(177), 1,
      sym_name,
    ACTIONS(180), 1,
      anon_sym_SEMI,
    ACTIONS(183), 1,
      anon_sym_when,
    ACTIONS(186), 1,
      anon_sym_RBRACE,
    STATE(38), 4,
      sym_param,
      sym_item,
      sym_rule,
      aux_sym_block_repeat1,
  [959] = 6,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(165), 1,
      sym_name,
    ACTIONS(169), 1,
      anon_sym_when,
    ACTIONS(188), 1,
      anon_sym_SEMI,
    ACTIONS(190), 1,
      anon_sym_RBRACE,
    STATE(43), 4,
      sym_param,
      sym_item,
      sym_rule,
      aux_sym_block_repeat1,
  [981] = 6,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(165), 1,
      sym_name,
    ACTIONS(169), 1,
      anon_sym_when,
    ACTIONS(192), 1,
      anon_sym_SEMI,
    ACTIONS(194), 1,
      anon_sym_RBRACE,
    STATE(42), 4,
      sym_param,
      sym_item,
      sym_rule,
      aux_sym_block_repeat1,
  [1003] = 6,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(165), 1,
      sym_name,
    ACTIONS(169), 1,
      anon_sym_when,
    ACTIONS(196), 1,
      anon_sym_SEMI,
    ACTIONS(198), 1,
      anon_sym_RBRACE,
    STATE(44), 4,
      sym_param,
      sym_item,
      sym_rule,
      aux_sym_block_repeat1,
  [1025] = 6,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(165), 1,
      sym_name,
    ACTIONS(167), 1,
      anon_sym_SEMI,
    ACTIONS(169), 1,
      anon_sym_when,
    ACTIONS(200), 1,
      anon_sym_RBRACE,
    STATE(38), 4,
      sym_param,
      sym_item,
      sym_rule,
      aux_sym_block_repeat1,
  [1047] = 6,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(165), 1,
      sym_name,
    ACTIONS(167), 1,
      anon_sym_SEMI,
    ACTIONS(169), 1,
      anon_sym_when,
    ACTIONS(202), 1,
      anon_sym_RBRACE,
    STATE(38), 4,
      sym_param,
      sym_item,
      sym_rule,
      aux_sym_block_repeat1,
  [1069] = 6,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(165), 1,
      sym_name,
    ACTIONS(167), 1,
      anon_sym_SEMI,
    ACTIONS(169), 1,
      anon_sym_when,
    ACTIONS(204), 1,
      anon_sym_RBRACE,
    STATE(38), 4,
      sym_param,
      sym_item,
      sym_rule,
      aux_sym_block_repeat1,
  [1091] = 4,
    ACTIONS(3), 1,
      sym_comment,
    STATE(121), 1,
      sym_operator,
    ACTIONS(206), 2,
      anon_sym_LT,
      anon_sym_GT,
    ACTIONS(208), 4,
      anon_sym_LT_EQ,
      anon_sym_GT_EQ,
      anon_sym_BANG_EQ,
      anon_sym_EQ_EQ,
  [1108] = 5,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(214), 1,
      anon_sym_PIPE,
    ACTIONS(216), 1,
      anon_sym_COLON,
    ACTIONS(210), 2,
      anon_sym_when,
      sym_name,
    ACTIONS(212), 2,
      anon_sym_SEMI,
      anon_sym_RBRACE,
  [1126] = 3,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(218), 3,
      anon_sym_when,
      anon_sym_for,
      sym_name,
    ACTIONS(220), 3,
      anon_sym_SEMI,
      anon_sym_LBRACE,
      anon_sym_RBRACE,
  [1140] = 2,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(222), 5,
      ts_builtin_sym_end,
      anon_sym_SEMI,
      anon_sym_version,
      anon_sym_import,
      anon_sym_policy,
  [1151] = 2,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(224), 5,
      ts_builtin_sym_end,
      anon_sym_SEMI,
      anon_sym_version,
      anon_sym_import,
      anon_sym_policy,
  [1162] = 2,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(226), 5,
      ts_builtin_sym_end,
      anon_sym_SEMI,
      anon_sym_version,
      anon_sym_import,
      anon_sym_policy,
  [1173] = 3,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(230), 2,
      anon_sym_SEMI,
      anon_sym_RBRACE,
    ACTIONS(228), 3,
      anon_sym_trigger,
      anon_sym_rebalance,
      sym_name,
  [1186] = 2,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(232), 5,
      ts_builtin_sym_end,
      anon_sym_SEMI,
      anon_sym_version,
      anon_sym_import,
      anon_sym_policy,
  [1197] = 2,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(234), 5,
      ts_builtin_sym_end,
      anon_sym_SEMI,
      anon_sym_version,
      anon_sym_import,
      anon_sym_policy,
  [1208] = 5,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(236), 1,
      sym_name,
    ACTIONS(239), 1,
      anon_sym_SEMI,
    ACTIONS(242), 1,
      anon_sym_RBRACE,
    STATE(54), 2,
      sym_block,
      aux_sym_policy_repeat1,
  [1225] = 3,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(246), 2,
      anon_sym_SEMI,
      anon_sym_RBRACE,
    ACTIONS(244), 3,
      anon_sym_trigger,
      anon_sym_rebalance,
      sym_name,
  [1238] = 5,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(248), 1,
      sym_name,
    ACTIONS(250), 1,
      anon_sym_SEMI,
    ACTIONS(252), 1,
      anon_sym_RBRACE,
    STATE(54), 2,
      sym_block,
      aux_sym_policy_repeat1,
  [1255] = 4,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(258), 1,
      anon_sym_COLON,
    ACTIONS(254), 2,
      anon_sym_when,
      sym_name,
    ACTIONS(256), 2,
      anon_sym_SEMI,
      anon_sym_RBRACE,
  [1270] = 3,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(262), 2,
      anon_sym_SEMI,
      anon_sym_RBRACE,
    ACTIONS(260), 3,
      anon_sym_trigger,
      anon_sym_rebalance,
      sym_name,
  [1283] = 2,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(264), 5,
      ts_builtin_sym_end,
      anon_sym_SEMI,
      anon_sym_version,
      anon_sym_import,
      anon_sym_policy,
  [1294] = 5,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(248), 1,
      sym_name,
    ACTIONS(266), 1,
      anon_sym_SEMI,
    ACTIONS(268), 1,
      anon_sym_RBRACE,
    STATE(56), 2,
      sym_block,
      aux_sym_policy_repeat1,
  [1311] = 5,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(248), 1,
      sym_name,
    ACTIONS(270), 1,
      anon_sym_SEMI,
    ACTIONS(272), 1,
      anon_sym_RBRACE,
    STATE(62), 2,
      sym_block,
      aux_sym_policy_repeat1,
  [1328] = 5,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(248), 1,
      sym_name,
    ACTIONS(250), 1,
      anon_sym_SEMI,
    ACTIONS(274), 1,
      anon_sym_RBRACE,
    STATE(54), 2,
      sym_block,
      aux_sym_policy_repeat1,
  [1345] = 3,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(276), 2,
      anon_sym_when,
      sym_name,
    ACTIONS(278), 2,
      anon_sym_SEMI,
      anon_sym_RBRACE,
  [1357] = 3,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(280), 2,
      anon_sym_when,
      sym_name,
    ACTIONS(282), 2,
      anon_sym_SEMI,
      anon_sym_RBRACE,
  [1369] = 3,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(284), 2,
      anon_sym_when,
      sym_name,
    ACTIONS(286), 2,
      anon_sym_SEMI,
      anon_sym_RBRACE,
  [1381] = 3,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(288), 2,
      anon_sym_when,
      sym_name,
    ACTIONS(290), 2,
      anon_sym_SEMI,
      anon_sym_RBRACE,
  [1393] = 3,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(292), 2,
      anon_sym_when,
      sym_name,
    ACTIONS(294), 2,
      anon_sym_SEMI,
      anon_sym_RBRACE,
  [1405] = 3,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(296), 2,
      anon_sym_when,
      sym_name,
    ACTIONS(298), 2,
      anon_sym_SEMI,
      anon_sym_RBRACE,
  [1417] = 3,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(300), 2,
      anon_sym_when,
      sym_name,
    ACTIONS(302), 2,
      anon_sym_SEMI,
      anon_sym_RBRACE,
  [1429] = 3,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(304), 2,
      anon_sym_when,
      sym_name,
    ACTIONS(306), 2,
      anon_sym_SEMI,
      anon_sym_RBRACE,
  [1441] = 5,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(308), 1,
      sym_name,
    ACTIONS(310), 1,
      anon_sym_EQ,
    STATE(107), 1,
      sym_edge,
    STATE(114), 1,
      sym_selector,
  [1457] = 3,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(312), 2,
      anon_sym_when,
      sym_name,
    ACTIONS(314), 2,
      anon_sym_SEMI,
      anon_sym_RBRACE,
  [1469] = 3,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(316), 2,
      anon_sym_when,
      sym_name,
    ACTIONS(318), 2,
      anon_sym_SEMI,
      anon_sym_RBRACE,
  [1481] = 3,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(320), 2,
      anon_sym_when,
      sym_name,
    ACTIONS(322), 2,
      anon_sym_SEMI,
      anon_sym_RBRACE,
  [1493] = 3,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(324), 2,
      anon_sym_when,
      sym_name,
    ACTIONS(326), 2,
      anon_sym_SEMI,
      anon_sym_RBRACE,
  [1505] = 3,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(328), 2,
      anon_sym_when,
      sym_name,
    ACTIONS(330), 2,
      anon_sym_SEMI,
      anon_sym_RBRACE,
  [1517] = 4,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(332), 1,
      anon_sym_RPAREN,
    ACTIONS(334), 1,
      anon_sym_COMMA,
    STATE(77), 1,
      aux_sym_call_repeat1,
  [1530] = 4,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(337), 1,
      anon_sym_RPAREN,
    ACTIONS(339), 1,
      anon_sym_COMMA,
    STATE(77), 1,
      aux_sym_call_repeat1,
  [1543] = 4,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(341), 1,
      anon_sym_LBRACE,
    ACTIONS(343), 1,
      anon_sym_EQ,
    ACTIONS(345), 1,
      anon_sym_LPAREN,
  [1556] = 4,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(347), 1,
      anon_sym_COMMA,
    ACTIONS(349), 1,
      anon_sym_RBRACK,
    STATE(86), 1,
      aux_sym_list_repeat1,
  [1569] = 4,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(339), 1,
      anon_sym_COMMA,
    ACTIONS(351), 1,
      anon_sym_RPAREN,
    STATE(78), 1,
      aux_sym_call_repeat1,
  [1582] = 4,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(347), 1,
      anon_sym_COMMA,
    ACTIONS(353), 1,
      anon_sym_RBRACK,
    STATE(80), 1,
      aux_sym_list_repeat1,
  [1595] = 2,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(355), 3,
      anon_sym_SEMI,
      anon_sym_RBRACE,
      sym_name,
  [1604] = 4,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(357), 1,
      sym_name,
    ACTIONS(359), 1,
      anon_sym_RPAREN,
    STATE(81), 1,
      sym_argument,
  [1617] = 2,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(361), 3,
      anon_sym_SEMI,
      anon_sym_RBRACE,
      sym_name,
  [1626] = 4,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(363), 1,
      anon_sym_COMMA,
    ACTIONS(366), 1,
      anon_sym_RBRACK,
    STATE(86), 1,
      aux_sym_list_repeat1,
  [1639] = 2,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(368), 2,
      anon_sym_RPAREN,
      anon_sym_COMMA,
  [1647] = 3,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(370), 1,
      sym_number,
    STATE(106), 1,
      sym_quantity,
  [1657] = 3,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(372), 1,
      anon_sym_extends,
    ACTIONS(374), 1,
      anon_sym_LBRACE,
  [1667] = 3,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(376), 1,
      anon_sym_EQ,
    ACTIONS(378), 1,
      anon_sym_DOT,
  [1677] = 3,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(380), 1,
      sym_name,
    STATE(92), 1,
      sym_condition,
  [1687] = 3,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(382), 1,
      anon_sym_for,
    ACTIONS(384), 1,
      anon_sym_LBRACE,
  [1697] = 2,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(366), 2,
      anon_sym_COMMA,
      anon_sym_RBRACK,
  [1705] = 2,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(386), 2,
      anon_sym_extends,
      anon_sym_LBRACE,
  [1713] = 3,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(357), 1,
      sym_name,
    STATE(97), 1,
      sym_argument,
  [1723] = 3,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(380), 1,
      sym_name,
    STATE(75), 1,
      sym_condition,
  [1733] = 2,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(332), 2,
      anon_sym_RPAREN,
      anon_sym_COMMA,
  [1741] = 3,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(380), 1,
      sym_name,
    STATE(76), 1,
      sym_condition,
  [1751] = 2,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(388), 1,
      sym_name,
  [1758] = 2,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(390), 1,
      ts_builtin_sym_end,
  [1765] = 2,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(392), 1,
      anon_sym_when,
  [1772] = 2,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(394), 1,
      sym_number,
  [1779] = 2,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(396), 1,
      sym_name,
  [1786] = 2,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(398), 1,
      anon_sym_LBRACE,
  [1793] = 2,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(400), 1,
      sym_string,
  [1800] = 2,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(402), 1,
      anon_sym_LBRACE,
  [1807] = 2,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(404), 1,
      anon_sym_LBRACE,
  [1814] = 2,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(406), 1,
      sym_number,
  [1821] = 2,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(408), 1,
      anon_sym_LBRACE,
  [1828] = 2,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(410), 1,
      anon_sym_EQ,
  [1835] = 2,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(412), 1,
      anon_sym_RPAREN,
  [1842] = 2,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(414), 1,
      anon_sym_DASH_GT,
  [1849] = 2,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(416), 1,
      sym_name,
  [1856] = 2,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(418), 1,
      anon_sym_LBRACE,
  [1863] = 2,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(420), 1,
      sym_name,
  [1870] = 2,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(422), 1,
      sym_number,
  [1877] = 2,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(424), 1,
      anon_sym_when,
  [1884] = 2,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(426), 1,
      sym_name,
  [1891] = 2,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(428), 1,
      anon_sym_LBRACE,
  [1898] = 2,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(430), 1,
      anon_sym_EQ,
  [1905] = 2,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(432), 1,
      sym_number,
  [1912] = 2,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(434), 1,
      anon_sym_LBRACE,
  [1919] = 2,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(436), 1,
      anon_sym_EQ,
};

static const uint32_t ts_small_parse_table_map[] = {
  [SMALL_STATE(2)] = 0,
  [SMALL_STATE(3)] = 32,
  [SMALL_STATE(4)] = 63,
  [SMALL_STATE(5)] = 99,
  [SMALL_STATE(6)] = 135,
  [SMALL_STATE(7)] = 163,
  [SMALL_STATE(8)] = 196,
  [SMALL_STATE(9)] = 229,
  [SMALL_STATE(10)] = 262,
  [SMALL_STATE(11)] = 295,
  [SMALL_STATE(12)] = 328,
  [SMALL_STATE(13)] = 361,
  [SMALL_STATE(14)] = 394,
  [SMALL_STATE(15)] = 417,
  [SMALL_STATE(16)] = 439,
  [SMALL_STATE(17)] = 459,
  [SMALL_STATE(18)] = 479,
  [SMALL_STATE(19)] = 499,
  [SMALL_STATE(20)] = 521,
  [SMALL_STATE(21)] = 541,
  [SMALL_STATE(22)] = 561,
  [SMALL_STATE(23)] = 581,
  [SMALL_STATE(24)] = 601,
  [SMALL_STATE(25)] = 621,
  [SMALL_STATE(26)] = 641,
  [SMALL_STATE(27)] = 661,
  [SMALL_STATE(28)] = 683,
  [SMALL_STATE(29)] = 703,
  [SMALL_STATE(30)] = 731,
  [SMALL_STATE(31)] = 759,
  [SMALL_STATE(32)] = 787,
  [SMALL_STATE(33)] = 815,
  [SMALL_STATE(34)] = 843,
  [SMALL_STATE(35)] = 868,
  [SMALL_STATE(36)] = 893,
  [SMALL_STATE(37)] = 915,
  [SMALL_STATE(38)] = 937,
  [SMALL_STATE(39)] = 959,
  [SMALL_STATE(40)] = 981,
  [SMALL_STATE(41)] = 1003,
  [SMALL_STATE(42)] = 1025,
  [SMALL_STATE(43)] = 1047,
  [SMALL_STATE(44)] = 1069,
  [SMALL_STATE(45)] = 1091,
  [SMALL_STATE(46)] = 1108,
  [SMALL_STATE(47)] = 1126,
  [SMALL_STATE(48)] = 1140,
  [SMALL_STATE(49)] = 1151,
  [SMALL_STATE(50)] = 1162,
  [SMALL_STATE(51)] = 1173,
  [SMALL_STATE(52)] = 1186,
  [SMALL_STATE(53)] = 1197,
  [SMALL_STATE(54)] = 1208,
  [SMALL_STATE(55)] = 1225,
  [SMALL_STATE(56)] = 1238,
  [SMALL_STATE(57)] = 1255,
  [SMALL_STATE(58)] = 1270,
  [SMALL_STATE(59)] = 1283,
  [SMALL_STATE(60)] = 1294,
  [SMALL_STATE(61)] = 1311,
  [SMALL_STATE(62)] = 1328,
  [SMALL_STATE(63)] = 1345,
  [SMALL_STATE(64)] = 1357,
  [SMALL_STATE(65)] = 1369,
  [SMALL_STATE(66)] = 1381,
  [SMALL_STATE(67)] = 1393,
  [SMALL_STATE(68)] = 1405,
  [SMALL_STATE(69)] = 1417,
  [SMALL_STATE(70)] = 1429,
  [SMALL_STATE(71)] = 1441,
  [SMALL_STATE(72)] = 1457,
  [SMALL_STATE(73)] = 1469,
  [SMALL_STATE(74)] = 1481,
  [SMALL_STATE(75)] = 1493,
  [SMALL_STATE(76)] = 1505,
  [SMALL_STATE(77)] = 1517,
  [SMALL_STATE(78)] = 1530,
  [SMALL_STATE(79)] = 1543,
  [SMALL_STATE(80)] = 1556,
  [SMALL_STATE(81)] = 1569,
  [SMALL_STATE(82)] = 1582,
  [SMALL_STATE(83)] = 1595,
  [SMALL_STATE(84)] = 1604,
  [SMALL_STATE(85)] = 1617,
  [SMALL_STATE(86)] = 1626,
  [SMALL_STATE(87)] = 1639,
  [SMALL_STATE(88)] = 1647,
  [SMALL_STATE(89)] = 1657,
  [SMALL_STATE(90)] = 1667,
  [SMALL_STATE(91)] = 1677,
  [SMALL_STATE(92)] = 1687,
  [SMALL_STATE(93)] = 1697,
  [SMALL_STATE(94)] = 1705,
  [SMALL_STATE(95)] = 1713,
  [SMALL_STATE(96)] = 1723,
  [SMALL_STATE(97)] = 1733,
  [SMALL_STATE(98)] = 1741,
  [SMALL_STATE(99)] = 1751,
  [SMALL_STATE(100)] = 1758,
  [SMALL_STATE(101)] = 1765,
  [SMALL_STATE(102)] = 1772,
  [SMALL_STATE(103)] = 1779,
  [SMALL_STATE(104)] = 1786,
  [SMALL_STATE(105)] = 1793,
  [SMALL_STATE(106)] = 1800,
  [SMALL_STATE(107)] = 1807,
  [SMALL_STATE(108)] = 1814,
  [SMALL_STATE(109)] = 1821,
  [SMALL_STATE(110)] = 1828,
  [SMALL_STATE(111)] = 1835,
  [SMALL_STATE(112)] = 1842,
  [SMALL_STATE(113)] = 1849,
  [SMALL_STATE(114)] = 1856,
  [SMALL_STATE(115)] = 1863,
  [SMALL_STATE(116)] = 1870,
  [SMALL_STATE(117)] = 1877,
  [SMALL_STATE(118)] = 1884,
  [SMALL_STATE(119)] = 1891,
  [SMALL_STATE(120)] = 1898,
  [SMALL_STATE(121)] = 1905,
  [SMALL_STATE(122)] = 1912,
  [SMALL_STATE(123)] = 1919,
};

static const TSParseActionEntry ts_parse_actions[] = {
  [0] = {.entry = {.count = 0, .reusable = false}},
  [1] = {.entry = {.count = 1, .reusable = false}}, RECOVER(),
  [3] = {.entry = {.count = 1, .reusable = true}}, SHIFT_EXTRA(),
  [5] = {.entry = {.count = 1, .reusable = true}}, REDUCE(sym_source_file, 0, 0, 0),
  [7] = {.entry = {.count = 1, .reusable = true}}, SHIFT(34),
  [9] = {.entry = {.count = 1, .reusable = true}}, SHIFT(108),
  [11] = {.entry = {.count = 1, .reusable = true}}, SHIFT(105),
  [13] = {.entry = {.count = 1, .reusable = true}}, SHIFT(15),
  [15] = {.entry = {.count = 1, .reusable = false}}, REDUCE(sym_quantity, 1, 0, 0),
  [17] = {.entry = {.count = 1, .reusable = true}}, REDUCE(sym_quantity, 1, 0, 0),
  [19] = {.entry = {.count = 1, .reusable = true}}, SHIFT(102),
  [21] = {.entry = {.count = 1, .reusable = false}}, SHIFT(21),
  [23] = {.entry = {.count = 1, .reusable = false}}, SHIFT(14),
  [25] = {.entry = {.count = 1, .reusable = false}}, SHIFT(17),
  [27] = {.entry = {.count = 1, .reusable = true}}, SHIFT(18),
  [29] = {.entry = {.count = 1, .reusable = true}}, SHIFT(82),
  [31] = {.entry = {.count = 1, .reusable = true}}, SHIFT(4),
  [33] = {.entry = {.count = 1, .reusable = true}}, SHIFT(20),
  [35] = {.entry = {.count = 1, .reusable = false}}, SHIFT(6),
  [37] = {.entry = {.count = 1, .reusable = true}}, SHIFT(46),
  [39] = {.entry = {.count = 1, .reusable = false}}, SHIFT(2),
  [41] = {.entry = {.count = 1, .reusable = true}}, SHIFT(87),
  [43] = {.entry = {.count = 1, .reusable = true}}, SHIFT(109),
  [45] = {.entry = {.count = 1, .reusable = true}}, SHIFT(57),
  [47] = {.entry = {.count = 1, .reusable = true}}, SHIFT(101),
  [49] = {.entry = {.count = 1, .reusable = true}}, SHIFT(58),
  [51] = {.entry = {.count = 1, .reusable = false}}, SHIFT(3),
  [53] = {.entry = {.count = 1, .reusable = true}}, SHIFT(93),
  [55] = {.entry = {.count = 1, .reusable = true}}, SHIFT(117),
  [57] = {.entry = {.count = 1, .reusable = false}}, REDUCE(sym_identifier, 1, 0, 0),
  [59] = {.entry = {.count = 1, .reusable = true}}, REDUCE(sym_identifier, 1, 0, 0),
  [61] = {.entry = {.count = 1, .reusable = true}}, SHIFT(84),
  [63] = {.entry = {.count = 1, .reusable = false}}, SHIFT(89),
  [65] = {.entry = {.count = 1, .reusable = false}}, SHIFT(94),
  [67] = {.entry = {.count = 1, .reusable = false}}, REDUCE(sym_call, 5, 0, 16),
  [69] = {.entry = {.count = 1, .reusable = true}}, REDUCE(sym_call, 5, 0, 16),
  [71] = {.entry = {.count = 1, .reusable = false}}, REDUCE(sym_boolean, 1, 0, 0),
  [73] = {.entry = {.count = 1, .reusable = true}}, REDUCE(sym_boolean, 1, 0, 0),
  [75] = {.entry = {.count = 1, .reusable = false}}, REDUCE(sym_range, 1, 0, 0),
  [77] = {.entry = {.count = 1, .reusable = true}}, REDUCE(sym_range, 1, 0, 0),
  [79] = {.entry = {.count = 1, .reusable = false}}, REDUCE(sym_list, 2, 0, 0),
  [81] = {.entry = {.count = 1, .reusable = true}}, REDUCE(sym_list, 2, 0, 0),
  [83] = {.entry = {.count = 1, .reusable = false}}, REDUCE(sym_unit, 1, 0, 0),
  [85] = {.entry = {.count = 1, .reusable = true}}, REDUCE(sym_unit, 1, 0, 0),
  [87] = {.entry = {.count = 1, .reusable = false}}, REDUCE(sym_quantity, 2, 0, 10),
  [89] = {.entry = {.count = 1, .reusable = true}}, REDUCE(sym_quantity, 2, 0, 10),
  [91] = {.entry = {.count = 1, .reusable = false}}, REDUCE(sym_range, 3, 0, 15),
  [93] = {.entry = {.count = 1, .reusable = true}}, REDUCE(sym_range, 3, 0, 15),
  [95] = {.entry = {.count = 1, .reusable = false}}, REDUCE(sym_list, 3, 0, 0),
  [97] = {.entry = {.count = 1, .reusable = true}}, REDUCE(sym_list, 3, 0, 0),
  [99] = {.entry = {.count = 1, .reusable = false}}, REDUCE(sym_call, 3, 0, 16),
  [101] = {.entry = {.count = 1, .reusable = true}}, REDUCE(sym_call, 3, 0, 16),
  [103] = {.entry = {.count = 1, .reusable = false}}, REDUCE(sym_list, 4, 0, 0),
  [105] = {.entry = {.count = 1, .reusable = true}}, REDUCE(sym_list, 4, 0, 0),
  [107] = {.entry = {.count = 1, .reusable = false}}, SHIFT(122),
  [109] = {.entry = {.count = 1, .reusable = false}}, REDUCE(sym_call, 4, 0, 16),
  [111] = {.entry = {.count = 1, .reusable = true}}, REDUCE(sym_call, 4, 0, 16),
  [113] = {.entry = {.count = 1, .reusable = false}}, SHIFT(90),
  [115] = {.entry = {.count = 1, .reusable = true}}, SHIFT(30),
  [117] = {.entry = {.count = 1, .reusable = false}}, SHIFT(115),
  [119] = {.entry = {.count = 1, .reusable = false}}, SHIFT(118),
  [121] = {.entry = {.count = 1, .reusable = true}}, SHIFT(64),
  [123] = {.entry = {.count = 1, .reusable = true}}, SHIFT(33),
  [125] = {.entry = {.count = 1, .reusable = true}}, SHIFT(65),
  [127] = {.entry = {.count = 1, .reusable = true}}, SHIFT(72),
  [129] = {.entry = {.count = 1, .reusable = true}}, SHIFT(31),
  [131] = {.entry = {.count = 1, .reusable = true}}, SHIFT(70),
  [133] = {.entry = {.count = 2, .reusable = false}}, REDUCE(aux_sym_rule_repeat1, 2, 0, 0), SHIFT_REPEAT(90),
  [136] = {.entry = {.count = 2, .reusable = true}}, REDUCE(aux_sym_rule_repeat1, 2, 0, 0), SHIFT_REPEAT(33),
  [139] = {.entry = {.count = 2, .reusable = false}}, REDUCE(aux_sym_rule_repeat1, 2, 0, 0), SHIFT_REPEAT(115),
  [142] = {.entry = {.count = 2, .reusable = false}}, REDUCE(aux_sym_rule_repeat1, 2, 0, 0), SHIFT_REPEAT(118),
  [145] = {.entry = {.count = 1, .reusable = true}}, REDUCE(aux_sym_rule_repeat1, 2, 0, 0),
  [147] = {.entry = {.count = 1, .reusable = true}}, REDUCE(sym_source_file, 1, 0, 0),
  [149] = {.entry = {.count = 1, .reusable = true}}, SHIFT(35),
  [151] = {.entry = {.count = 1, .reusable = true}}, REDUCE(aux_sym_source_file_repeat1, 2, 0, 0),
  [153] = {.entry = {.count = 2, .reusable = true}}, REDUCE(aux_sym_source_file_repeat1, 2, 0, 0), SHIFT_REPEAT(35),
  [156] = {.entry = {.count = 2, .reusable = true}}, REDUCE(aux_sym_source_file_repeat1, 2, 0, 0), SHIFT_REPEAT(108),
  [159] = {.entry = {.count = 2, .reusable = true}}, REDUCE(aux_sym_source_file_repeat1, 2, 0, 0), SHIFT_REPEAT(105),
  [162] = {.entry = {.count = 2, .reusable = true}}, REDUCE(aux_sym_source_file_repeat1, 2, 0, 0), SHIFT_REPEAT(15),
  [165] = {.entry = {.count = 1, .reusable = false}}, SHIFT(71),
  [167] = {.entry = {.count = 1, .reusable = true}}, SHIFT(38),
  [169] = {.entry = {.count = 1, .reusable = false}}, SHIFT(91),
  [171] = {.entry = {.count = 1, .reusable = true}}, SHIFT(83),
  [173] = {.entry = {.count = 1, .reusable = true}}, SHIFT(36),
  [175] = {.entry = {.count = 1, .reusable = true}}, SHIFT(85),
  [177] = {.entry = {.count = 2, .reusable = false}}, REDUCE(aux_sym_block_repeat1, 2, 0, 0), SHIFT_REPEAT(71),
  [180] = {.entry = {.count = 2, .reusable = true}}, REDUCE(aux_sym_block_repeat1, 2, 0, 0), SHIFT_REPEAT(38),
  [183] = {.entry = {.count = 2, .reusable = false}}, REDUCE(aux_sym_block_repeat1, 2, 0, 0), SHIFT_REPEAT(91),
  [186] = {.entry = {.count = 1, .reusable = true}}, REDUCE(aux_sym_block_repeat1, 2, 0, 0),
  [188] = {.entry = {.count = 1, .reusable = true}}, SHIFT(43),
  [190] = {.entry = {.count = 1, .reusable = true}}, SHIFT(66),
  [192] = {.entry = {.count = 1, .reusable = true}}, SHIFT(42),
  [194] = {.entry = {.count = 1, .reusable = true}}, SHIFT(67),
  [196] = {.entry = {.count = 1, .reusable = true}}, SHIFT(44),
  [198] = {.entry = {.count = 1, .reusable = true}}, SHIFT(63),
  [200] = {.entry = {.count = 1, .reusable = true}}, SHIFT(68),
  [202] = {.entry = {.count = 1, .reusable = true}}, SHIFT(73),
  [204] = {.entry = {.count = 1, .reusable = true}}, SHIFT(69),
  [206] = {.entry = {.count = 1, .reusable = false}}, SHIFT(116),
  [208] = {.entry = {.count = 1, .reusable = true}}, SHIFT(116),
  [210] = {.entry = {.count = 1, .reusable = false}}, REDUCE(sym_expression, 1, 0, 0),
  [212] = {.entry = {.count = 1, .reusable = true}}, REDUCE(sym_expression, 1, 0, 0),
  [214] = {.entry = {.count = 1, .reusable = true}}, SHIFT(9),
  [216] = {.entry = {.count = 1, .reusable = true}}, SHIFT(10),
  [218] = {.entry = {.count = 1, .reusable = false}}, REDUCE(sym_condition, 3, 0, 8),
  [220] = {.entry = {.count = 1, .reusable = true}}, REDUCE(sym_condition, 3, 0, 8),
  [222] = {.entry = {.count = 1, .reusable = true}}, REDUCE(sym_policy, 5, 0, 4),
  [224] = {.entry = {.count = 1, .reusable = true}}, REDUCE(sym_policy, 4, 0, 4),
  [226] = {.entry = {.count = 1, .reusable = true}}, REDUCE(sym_policy, 7, 0, 5),
  [228] = {.entry = {.count = 1, .reusable = false}}, REDUCE(sym_rebalance_action, 2, 0, 14),
  [230] = {.entry = {.count = 1, .reusable = true}}, REDUCE(sym_rebalance_action, 2, 0, 14),
  [232] = {.entry = {.count = 1, .reusable = true}}, REDUCE(sym_import, 2, 0, 2),
  [234] = {.entry = {.count = 1, .reusable = true}}, REDUCE(sym_policy, 6, 0, 5),
  [236] = {.entry = {.count = 2, .reusable = true}}, REDUCE(aux_sym_policy_repeat1, 2, 0, 0), SHIFT_REPEAT(104),
  [239] = {.entry = {.count = 2, .reusable = true}}, REDUCE(aux_sym_policy_repeat1, 2, 0, 0), SHIFT_REPEAT(54),
  [242] = {.entry = {.count = 1, .reusable = true}}, REDUCE(aux_sym_policy_repeat1, 2, 0, 0),
  [244] = {.entry = {.count = 1, .reusable = false}}, REDUCE(sym_trigger_action, 2, 0, 4),
  [246] = {.entry = {.count = 1, .reusable = true}}, REDUCE(sym_trigger_action, 2, 0, 4),
  [248] = {.entry = {.count = 1, .reusable = true}}, SHIFT(104),
  [250] = {.entry = {.count = 1, .reusable = true}}, SHIFT(54),
  [252] = {.entry = {.count = 1, .reusable = true}}, SHIFT(50),
  [254] = {.entry = {.count = 1, .reusable = false}}, REDUCE(sym_expression, 3, 0, 17),
  [256] = {.entry = {.count = 1, .reusable = true}}, REDUCE(sym_expression, 3, 0, 17),
  [258] = {.entry = {.count = 1, .reusable = true}}, SHIFT(13),
  [260] = {.entry = {.count = 1, .reusable = false}}, REDUCE(sym_set_action, 3, 0, 20),
  [262] = {.entry = {.count = 1, .reusable = true}}, REDUCE(sym_set_action, 3, 0, 20),
  [264] = {.entry = {.count = 1, .reusable = true}}, REDUCE(sym_version, 2, 0, 1),
  [266] = {.entry = {.count = 1, .reusable = true}}, SHIFT(56),
  [268] = {.entry = {.count = 1, .reusable = true}}, SHIFT(53),
  [270] = {.entry = {.count = 1, .reusable = true}}, SHIFT(62),
  [272] = {.entry = {.count = 1, .reusable = true}}, SHIFT(49),
  [274] = {.entry = {.count = 1, .reusable = true}}, SHIFT(48),
  [276] = {.entry = {.count = 1, .reusable = false}}, REDUCE(sym_item, 4, 0, 13),
  [278] = {.entry = {.count = 1, .reusable = true}}, REDUCE(sym_item, 4, 0, 13),
  [280] = {.entry = {.count = 1, .reusable = false}}, REDUCE(sym_rule, 4, 0, 9),
  [282] = {.entry = {.count = 1, .reusable = true}}, REDUCE(sym_rule, 4, 0, 9),
  [284] = {.entry = {.count = 1, .reusable = false}}, REDUCE(sym_rule, 5, 0, 9),
  [286] = {.entry = {.count = 1, .reusable = true}}, REDUCE(sym_rule, 5, 0, 9),
  [288] = {.entry = {.count = 1, .reusable = false}}, REDUCE(sym_item, 4, 0, 12),
  [290] = {.entry = {.count = 1, .reusable = true}}, REDUCE(sym_item, 4, 0, 12),
  [292] = {.entry = {.count = 1, .reusable = false}}, REDUCE(sym_item, 4, 0, 11),
  [294] = {.entry = {.count = 1, .reusable = true}}, REDUCE(sym_item, 4, 0, 11),
  [296] = {.entry = {.count = 1, .reusable = false}}, REDUCE(sym_item, 5, 0, 11),
  [298] = {.entry = {.count = 1, .reusable = true}}, REDUCE(sym_item, 5, 0, 11),
  [300] = {.entry = {.count = 1, .reusable = false}}, REDUCE(sym_item, 5, 0, 13),
  [302] = {.entry = {.count = 1, .reusable = true}}, REDUCE(sym_item, 5, 0, 13),
  [304] = {.entry = {.count = 1, .reusable = false}}, REDUCE(sym_rule, 6, 0, 18),
  [306] = {.entry = {.count = 1, .reusable = true}}, REDUCE(sym_rule, 6, 0, 18),
  [308] = {.entry = {.count = 1, .reusable = true}}, SHIFT(79),
  [310] = {.entry = {.count = 1, .reusable = true}}, SHIFT(5),
  [312] = {.entry = {.count = 1, .reusable = false}}, REDUCE(sym_rule, 7, 0, 18),
  [314] = {.entry = {.count = 1, .reusable = true}}, REDUCE(sym_rule, 7, 0, 18),
  [316] = {.entry = {.count = 1, .reusable = false}}, REDUCE(sym_item, 5, 0, 12),
  [318] = {.entry = {.count = 1, .reusable = true}}, REDUCE(sym_item, 5, 0, 12),
  [320] = {.entry = {.count = 1, .reusable = false}}, REDUCE(sym_param, 3, 0, 7),
  [322] = {.entry = {.count = 1, .reusable = true}}, REDUCE(sym_param, 3, 0, 7),
  [324] = {.entry = {.count = 1, .reusable = false}}, REDUCE(sym_expression, 5, 0, 21),
  [326] = {.entry = {.count = 1, .reusable = true}}, REDUCE(sym_expression, 5, 0, 21),
  [328] = {.entry = {.count = 1, .reusable = false}}, REDUCE(sym_expression, 7, 0, 23),
  [330] = {.entry = {.count = 1, .reusable = true}}, REDUCE(sym_expression, 7, 0, 23),
  [332] = {.entry = {.count = 1, .reusable = true}}, REDUCE(aux_sym_call_repeat1, 2, 0, 0),
  [334] = {.entry = {.count = 2, .reusable = true}}, REDUCE(aux_sym_call_repeat1, 2, 0, 0), SHIFT_REPEAT(95),
  [337] = {.entry = {.count = 1, .reusable = true}}, SHIFT(16),
  [339] = {.entry = {.count = 1, .reusable = true}}, SHIFT(95),
  [341] = {.entry = {.count = 1, .reusable = true}}, SHIFT(40),
  [343] = {.entry = {.count = 1, .reusable = true}}, SHIFT(8),
  [345] = {.entry = {.count = 1, .reusable = true}}, SHIFT(113),
  [347] = {.entry = {.count = 1, .reusable = true}}, SHIFT(12),
  [349] = {.entry = {.count = 1, .reusable = true}}, SHIFT(26),
  [351] = {.entry = {.count = 1, .reusable = true}}, SHIFT(28),
  [353] = {.entry = {.count = 1, .reusable = true}}, SHIFT(24),
  [355] = {.entry = {.count = 1, .reusable = true}}, REDUCE(sym_block, 4, 0, 6),
  [357] = {.entry = {.count = 1, .reusable = true}}, SHIFT(110),
  [359] = {.entry = {.count = 1, .reusable = true}}, SHIFT(25),
  [361] = {.entry = {.count = 1, .reusable = true}}, REDUCE(sym_block, 3, 0, 6),
  [363] = {.entry = {.count = 2, .reusable = true}}, REDUCE(aux_sym_list_repeat1, 2, 0, 0), SHIFT_REPEAT(12),
  [366] = {.entry = {.count = 1, .reusable = true}}, REDUCE(aux_sym_list_repeat1, 2, 0, 0),
  [368] = {.entry = {.count = 1, .reusable = true}}, REDUCE(sym_argument, 3, 0, 7),
  [370] = {.entry = {.count = 1, .reusable = true}}, SHIFT(19),
  [372] = {.entry = {.count = 1, .reusable = true}}, SHIFT(27),
  [374] = {.entry = {.count = 1, .reusable = true}}, SHIFT(61),
  [376] = {.entry = {.count = 1, .reusable = true}}, REDUCE(sym_target, 1, 0, 6),
  [378] = {.entry = {.count = 1, .reusable = true}}, SHIFT(99),
  [380] = {.entry = {.count = 1, .reusable = true}}, SHIFT(45),
  [382] = {.entry = {.count = 1, .reusable = true}}, SHIFT(88),
  [384] = {.entry = {.count = 1, .reusable = true}}, SHIFT(29),
  [386] = {.entry = {.count = 1, .reusable = true}}, REDUCE(sym__policy_name, 1, 0, 3),
  [388] = {.entry = {.count = 1, .reusable = true}}, SHIFT(123),
  [390] = {.entry = {.count = 1, .reusable = true}},  ACCEPT_INPUT(),
  [392] = {.entry = {.count = 1, .reusable = true}}, SHIFT(96),
  [394] = {.entry = {.count = 1, .reusable = true}}, SHIFT(23),
  [396] = {.entry = {.count = 1, .reusable = true}}, SHIFT(111),
  [398] = {.entry = {.count = 1, .reusable = true}}, SHIFT(37),
  [400] = {.entry = {.count = 1, .reusable = true}}, SHIFT(52),
  [402] = {.entry = {.count = 1, .reusable = true}}, SHIFT(32),
  [404] = {.entry = {.count = 1, .reusable = true}}, SHIFT(41),
  [406] = {.entry = {.count = 1, .reusable = true}}, SHIFT(59),
  [408] = {.entry = {.count = 1, .reusable = true}}, REDUCE(sym_selector, 3, 0, 7),
  [410] = {.entry = {.count = 1, .reusable = true}}, SHIFT(7),
  [412] = {.entry = {.count = 1, .reusable = true}}, SHIFT(119),
  [414] = {.entry = {.count = 1, .reusable = true}}, SHIFT(103),
  [416] = {.entry = {.count = 1, .reusable = true}}, SHIFT(112),
  [418] = {.entry = {.count = 1, .reusable = true}}, SHIFT(39),
  [420] = {.entry = {.count = 1, .reusable = true}}, SHIFT(55),
  [422] = {.entry = {.count = 1, .reusable = true}}, REDUCE(sym_operator, 1, 0, 0),
  [424] = {.entry = {.count = 1, .reusable = true}}, SHIFT(98),
  [426] = {.entry = {.count = 1, .reusable = true}}, SHIFT(51),
  [428] = {.entry = {.count = 1, .reusable = true}}, REDUCE(sym_edge, 6, 0, 22),
  [430] = {.entry = {.count = 1, .reusable = true}}, SHIFT(11),
  [432] = {.entry = {.count = 1, .reusable = true}}, SHIFT(47),
  [434] = {.entry = {.count = 1, .reusable = true}}, SHIFT(60),
  [436] = {.entry = {.count = 1, .reusable = true}}, REDUCE(sym_target, 3, 0, 19),
};

#ifdef __cplusplus
extern "C" {
#endif
#ifdef TREE_SITTER_HIDE_SYMBOLS
#define TS_PUBLIC
#elif defined(_WIN32)
#define TS_PUBLIC __declspec(dllexport)
#else
#define TS_PUBLIC __attribute__((visibility("default")))
#endif

TS_PUBLIC const TSLanguage *tree_sitter_moe(void) {
  static const TSLanguage language = {
    .version = LANGUAGE_VERSION,
    .symbol_count = SYMBOL_COUNT,
    .alias_count = ALIAS_COUNT,
    .token_count = TOKEN_COUNT,
    .external_token_count = EXTERNAL_TOKEN_COUNT,
    .state_count = STATE_COUNT,
    .large_state_count = LARGE_STATE_COUNT,
    .production_id_count = PRODUCTION_ID_COUNT,
    .field_count = FIELD_COUNT,
    .max_alias_sequence_length = MAX_ALIAS_SEQUENCE_LENGTH,
    .parse_table = &ts_parse_table[0][0],
    .small_parse_table = ts_small_parse_table,
    .small_parse_table_map = ts_small_parse_table_map,
    .parse_actions = ts_parse_actions,
    .symbol_names = ts_symbol_names,
    .field_names = ts_field_names,
    .field_map_slices = ts_field_map_slices,
    .field_map_entries = ts_field_map_entries,
    .symbol_metadata = ts_symbol_metadata,
    .public_symbol_map = ts_symbol_map,
    .alias_map = ts_non_terminal_alias_map,
    .alias_sequences = &ts_alias_sequences[0][0],
    .lex_modes = ts_lex_modes,
    .lex_fn = ts_lex,
    .keyword_lex_fn = ts_lex_keywords,
    .keyword_capture_token = sym_name,
    .primary_state_ids = ts_primary_state_ids,
  };
  return &language;
}
#ifdef __cplusplus
}
#endif
