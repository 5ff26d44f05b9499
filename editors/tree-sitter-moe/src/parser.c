#include "tree_sitter/parser.h"

#if defined(__GNUC__) || defined(__clang__)
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#endif

#define LANGUAGE_VERSION 14
#define STATE_COUNT 86
#define LARGE_STATE_COUNT 2
#define SYMBOL_COUNT 67
#define ALIAS_COUNT 0
#define TOKEN_COUNT 41
#define EXTERNAL_TOKEN_COUNT 0
#define FIELD_COUNT 16
#define MAX_ALIAS_SEQUENCE_LENGTH 7
#define PRODUCTION_ID_COUNT 18

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
  anon_sym_PIPE = 17,
  anon_sym_COLON = 18,
  aux_sym_unit_token1 = 19,
  anon_sym_accesses = 20,
  anon_sym_steps = 21,
  anon_sym_tokens = 22,
  anon_sym_GB = 23,
  anon_sym_GiB = 24,
  anon_sym_MB = 25,
  anon_sym_MiB = 26,
  anon_sym_ms = 27,
  anon_sym_us = 28,
  anon_sym_LBRACK = 29,
  anon_sym_COMMA = 30,
  anon_sym_RBRACK = 31,
  anon_sym_LT = 32,
  anon_sym_GT = 33,
  anon_sym_LT_EQ = 34,
  anon_sym_GT_EQ = 35,
  anon_sym_BANG_EQ = 36,
  anon_sym_EQ_EQ = 37,
  anon_sym_DOT = 38,
  sym_number = 39,
  sym_string = 40,
  sym_source_file = 41,
  sym_version = 42,
  sym_import = 43,
  sym__policy_name = 44,
  sym_policy = 45,
  sym_block = 46,
  sym_param = 47,
  sym_expression = 48,
  sym__value = 49,
  sym_quantity = 50,
  sym_unit = 51,
  sym_identifier = 52,
  sym_boolean = 53,
  sym_list = 54,
  sym_condition = 55,
  sym_operator = 56,
  sym_rule = 57,
  sym_set_action = 58,
  sym_target = 59,
  sym_trigger_action = 60,
  sym_rebalance_action = 61,
  aux_sym_source_file_repeat1 = 62,
  aux_sym_policy_repeat1 = 63,
  aux_sym_block_repeat1 = 64,
  aux_sym_list_repeat1 = 65,
  aux_sym_rule_repeat1 = 66,
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
  [anon_sym_PIPE] = "|",
  [anon_sym_COLON] = ":",
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
  [anon_sym_COMMA] = ",",
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
  [sym_expression] = "expression",
  [sym__value] = "_value",
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
  [anon_sym_PIPE] = anon_sym_PIPE,
  [anon_sym_COLON] = anon_sym_COLON,
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
  [anon_sym_COMMA] = anon_sym_COMMA,
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
  [sym_expression] = sym_expression,
  [sym__value] = sym__value,
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
  [anon_sym_PIPE] = {
    .visible = true,
    .named = false,
  },
  [anon_sym_COLON] = {
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
  [anon_sym_COMMA] = {
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
  [sym_expression] = {
    .visible = true,
    .named = true,
  },
  [sym__value] = {
    .visible = false,
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
  field_fallback = 6,
  field_metric = 7,
  field_name = 8,
  field_number = 9,
  field_operator = 10,
  field_parent = 11,
  field_path = 12,
  field_target = 13,
  field_threshold = 14,
  field_unit = 15,
  field_value = 16,
};

static const char * const ts_field_names[] = {
  [0] = NULL,
  [field_allocation] = "allocation",
  [field_alternative] = "alternative",
  [field_block] = "block",
  [field_condition] = "condition",
  [field_duration] = "duration",
  [field_fallback] = "fallback",
  [field_metric] = "metric",
  [field_name] = "name",
  [field_number] = "number",
  [field_operator] = "operator",
  [field_parent] = "parent",
  [field_path] = "path",
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
  [11] = {.index = 13, .length = 1},
  [12] = {.index = 14, .length = 1},
  [13] = {.index = 15, .length = 2},
  [14] = {.index = 17, .length = 2},
  [15] = {.index = 19, .length = 2},
  [16] = {.index = 21, .length = 2},
  [17] = {.index = 23, .length = 3},
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
    {field_allocation, 1},
  [14] =
    {field_fallback, 2},
  [15] =
    {field_condition, 1},
    {field_duration, 3},
  [17] =
    {field_block, 0},
    {field_name, 2},
  [19] =
    {field_target, 0},
    {field_value, 2},
  [21] =
    {field_alternative, 2},
    {field_condition, 4},
  [23] =
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
  [4] = 2,
  [5] = 5,
  [6] = 6,
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
};

static bool ts_lex(TSLexer *lexer, TSStateId state) {
  START_LEXER();
  eof = lexer->eof(lexer);
  switch (state) {
    case 0:
      if (eof) ADVANCE(13);
      ADVANCE_MAP(
        '!', 7,
        '"', 4,
        '#', 15,
        ',', 24,
        '-', 6,
        '.', 33,
        ':', 21,
        ';', 14,
        '<', 26,
        '=', 19,
        '>', 27,
        '[', 23,
        ']', 25,
        '{', 16,
        '|', 20,
        '}', 17,
      );
      if (('\t' <= lookahead && lookahead <= '\r') ||
          lookahead == ' ') SKIP(0);
      if (('0' <= lookahead && lookahead <= '9')) ADVANCE(34);
      if (('A' <= lookahead && lookahead <= 'Z') ||
          lookahead == '_' ||
          ('a' <= lookahead && lookahead <= 'z')) ADVANCE(38);
      END_STATE();
    case 1:
      ADVANCE_MAP(
        '!', 7,
        '#', 15,
        ',', 24,
        '-', 6,
        '.', 10,
        ':', 21,
        ';', 14,
        '<', 26,
        '=', 8,
        '>', 27,
        ']', 25,
        '{', 16,
        '|', 20,
        '}', 17,
      );
      if (('\t' <= lookahead && lookahead <= '\r') ||
          lookahead == ' ') SKIP(1);
      if (('0' <= lookahead && lookahead <= '9')) ADVANCE(34);
      if (('A' <= lookahead && lookahead <= 'Z') ||
          lookahead == '_' ||
          ('a' <= lookahead && lookahead <= 'z')) ADVANCE(38);
      END_STATE();
    case 2:
      ADVANCE_MAP(
        '!', 7,
        '#', 15,
        ',', 24,
        '-', 6,
        '.', 10,
        ':', 21,
        ';', 14,
        '<', 26,
        '=', 8,
        '>', 27,
        ']', 25,
        '{', 16,
        '|', 20,
        '}', 17,
      );
      if (('\t' <= lookahead && lookahead <= '\r') ||
          lookahead == ' ') SKIP(1);
      if (('0' <= lookahead && lookahead <= '9')) ADVANCE(34);
      if (('A' <= lookahead && lookahead <= 'Z') ||
          lookahead == '_' ||
          ('a' <= lookahead && lookahead <= 'z')) ADVANCE(22);
      END_STATE();
    case 3:
      if (lookahead == '"') ADVANCE(4);
      if (lookahead == '#') ADVANCE(15);
      if (lookahead == '-') ADVANCE(6);
      if (lookahead == '.') ADVANCE(10);
      if (lookahead == '=') ADVANCE(18);
      if (lookahead == '[') ADVANCE(23);
      if (lookahead == ']') ADVANCE(25);
      if (('\t' <= lookahead && lookahead <= '\r') ||
          lookahead == ' ') SKIP(3);
      if (('0' <= lookahead && lookahead <= '9')) ADVANCE(34);
      if (('A' <= lookahead && lookahead <= 'Z') ||
          lookahead == '_' ||
          ('a' <= lookahead && lookahead <= 'z')) ADVANCE(38);
      END_STATE();
    case 4:
      if (lookahead == '"') ADVANCE(37);
      if (lookahead == '\\') ADVANCE(12);
      if (lookahead != 0 &&
          lookahead != '\n') ADVANCE(4);
      END_STATE();
    case 5:
      if (lookahead == '#') ADVANCE(15);
      if (lookahead == '.') ADVANCE(32);
      if (lookahead == '=') ADVANCE(18);
      if (('\t' <= lookahead && lookahead <= '\r') ||
          lookahead == ' ') SKIP(5);
      END_STATE();
    case 6:
      if (lookahead == '.') ADVANCE(10);
      if (('0' <= lookahead && lookahead <= '9')) ADVANCE(34);
      END_STATE();
    case 7:
      if (lookahead == '=') ADVANCE(30);
      END_STATE();
    case 8:
      if (lookahead == '=') ADVANCE(31);
      END_STATE();
    case 9:
      if (lookahead == '+' ||
          lookahead == '-') ADVANCE(11);
      if (('0' <= lookahead && lookahead <= '9')) ADVANCE(36);
      END_STATE();
    case 10:
      if (('0' <= lookahead && lookahead <= '9')) ADVANCE(35);
      END_STATE();
    case 11:
      if (('0' <= lookahead && lookahead <= '9')) ADVANCE(36);
      END_STATE();
    case 12:
      if (lookahead != 0 &&
          lookahead != '\n') ADVANCE(4);
      END_STATE();
    case 13:
      ACCEPT_TOKEN(ts_builtin_sym_end);
      END_STATE();
    case 14:
      ACCEPT_TOKEN(anon_sym_SEMI);
      END_STATE();
    case 15:
      ACCEPT_TOKEN(sym_comment);
      if (lookahead != 0 &&
          lookahead != '\n') ADVANCE(15);
      END_STATE();
    case 16:
      ACCEPT_TOKEN(anon_sym_LBRACE);
      END_STATE();
    case 17:
      ACCEPT_TOKEN(anon_sym_RBRACE);
      END_STATE();
    case 18:
      ACCEPT_TOKEN(anon_sym_EQ);
      END_STATE();
    case 19:
      ACCEPT_TOKEN(anon_sym_EQ);
      if (lookahead == '=') ADVANCE(31);
      END_STATE();
    case 20:
      ACCEPT_TOKEN(anon_sym_PIPE);
      END_STATE();
    case 21:
      ACCEPT_TOKEN(anon_sym_COLON);
      END_STATE();
    case 22:
      ACCEPT_TOKEN(aux_sym_unit_token1);
      if (('0' <= lookahead && lookahead <= '9') ||
          ('A' <= lookahead && lookahead <= 'Z') ||
          lookahead == '_' ||
          ('a' <= lookahead && lookahead <= 'z')) ADVANCE(22);
      END_STATE();
    case 23:
      ACCEPT_TOKEN(anon_sym_LBRACK);
      END_STATE();
    case 24:
      ACCEPT_TOKEN(anon_sym_COMMA);
      END_STATE();
    case 25:
      ACCEPT_TOKEN(anon_sym_RBRACK);
      END_STATE();
    case 26:
      ACCEPT_TOKEN(anon_sym_LT);
      if (lookahead == '=') ADVANCE(28);
      END_STATE();
    case 27:
      ACCEPT_TOKEN(anon_sym_GT);
      if (lookahead == '=') ADVANCE(29);
      END_STATE();
    case 28:
      ACCEPT_TOKEN(anon_sym_LT_EQ);
      END_STATE();
    case 29:
      ACCEPT_TOKEN(anon_sym_GT_EQ);
      END_STATE();
    case 30:
      ACCEPT_TOKEN(anon_sym_BANG_EQ);
      END_STATE();
    case 31:
      ACCEPT_TOKEN(anon_sym_EQ_EQ);
      END_STATE();
    case 32:
      ACCEPT_TOKEN(anon_sym_DOT);
      END_STATE();
    case 33:
      ACCEPT_TOKEN(anon_sym_DOT);
      if (('0' <= lookahead && lookahead <= '9')) ADVANCE(35);
      END_STATE();
    case 34:
      ACCEPT_TOKEN(sym_number);
      if (lookahead == '.') ADVANCE(35);
      if (lookahead == 'E' ||
          lookahead == 'e') ADVANCE(9);
      if (('0' <= lookahead && lookahead <= '9')) ADVANCE(34);
      END_STATE();
    case 35:
      ACCEPT_TOKEN(sym_number);
      if (lookahead == 'E' ||
          lookahead == 'e') ADVANCE(9);
      if (('0' <= lookahead && lookahead <= '9')) ADVANCE(35);
      END_STATE();
    case 36:
      ACCEPT_TOKEN(sym_number);
      if (('0' <= lookahead && lookahead <= '9')) ADVANCE(36);
      END_STATE();
    case 37:
      ACCEPT_TOKEN(sym_string);
      END_STATE();
    case 38:
      ACCEPT_TOKEN(sym_name);
      if (('0' <= lookahead && lookahead <= '9') ||
          ('A' <= lookahead && lookahead <= 'Z') ||
          lookahead == '_' ||
          ('a' <= lookahead && lookahead <= 'z')) ADVANCE(38);
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
  [4] = {.lex_state = 2},
  [5] = {.lex_state = 0},
  [6] = {.lex_state = 0},
  [7] = {.lex_state = 3},
  [8] = {.lex_state = 3},
  [9] = {.lex_state = 3},
  [10] = {.lex_state = 0},
  [11] = {.lex_state = 3},
  [12] = {.lex_state = 0},
  [13] = {.lex_state = 3},
  [14] = {.lex_state = 3},
  [15] = {.lex_state = 3},
  [16] = {.lex_state = 0},
  [17] = {.lex_state = 0},
  [18] = {.lex_state = 0},
  [19] = {.lex_state = 0},
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
  [30] = {.lex_state = 2},
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
  [45] = {.lex_state = 0},
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
  [62] = {.lex_state = 2},
  [63] = {.lex_state = 5},
  [64] = {.lex_state = 0},
  [65] = {.lex_state = 0},
  [66] = {.lex_state = 0},
  [67] = {.lex_state = 0},
  [68] = {.lex_state = 0},
  [69] = {.lex_state = 0},
  [70] = {.lex_state = 3},
  [71] = {.lex_state = 3},
  [72] = {.lex_state = 0},
  [73] = {.lex_state = 2},
  [74] = {.lex_state = 2},
  [75] = {.lex_state = 0},
  [76] = {.lex_state = 0},
  [77] = {.lex_state = 0},
  [78] = {.lex_state = 3},
  [79] = {.lex_state = 0},
  [80] = {.lex_state = 0},
  [81] = {.lex_state = 0},
  [82] = {.lex_state = 0},
  [83] = {.lex_state = 0},
  [84] = {.lex_state = 2},
  [85] = {.lex_state = 0},
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
    [anon_sym_PIPE] = ACTIONS(1),
    [anon_sym_COLON] = ACTIONS(1),
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
    [anon_sym_COMMA] = ACTIONS(1),
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
    [sym_source_file] = STATE(72),
    [sym_version] = STATE(26),
    [sym_import] = STATE(26),
    [sym_policy] = STATE(26),
    [aux_sym_source_file_repeat1] = STATE(26),
    [ts_builtin_sym_end] = ACTIONS(5),
    [anon_sym_SEMI] = ACTIONS(7),
    [sym_comment] = ACTIONS(3),
    [anon_sym_version] = ACTIONS(9),
    [anon_sym_import] = ACTIONS(11),
    [anon_sym_policy] = ACTIONS(13),
  },
};

static const uint16_t ts_small_parse_table[] = {
  [0] = 5,
    ACTIONS(3), 1,
      sym_comment,
    STATE(12), 1,
      sym_unit,
    ACTIONS(15), 2,
      anon_sym_when,
      sym_name,
    ACTIONS(17), 4,
      anon_sym_SEMI,
      anon_sym_RBRACE,
      anon_sym_PIPE,
      anon_sym_COLON,
    ACTIONS(19), 10,
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
  [29] = 5,
    ACTIONS(3), 1,
      sym_comment,
    STATE(12), 1,
      sym_unit,
    ACTIONS(17), 2,
      anon_sym_SEMI,
      anon_sym_RBRACE,
    ACTIONS(15), 3,
      anon_sym_trigger,
      anon_sym_rebalance,
      sym_name,
    ACTIONS(19), 10,
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
  [57] = 4,
    ACTIONS(3), 1,
      sym_comment,
    STATE(12), 1,
      sym_unit,
    ACTIONS(17), 3,
      anon_sym_LBRACE,
      anon_sym_COMMA,
      anon_sym_RBRACK,
    ACTIONS(19), 10,
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
  [81] = 4,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(21), 1,
      sym_name,
    STATE(65), 1,
      sym__policy_name,
    ACTIONS(23), 10,
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
  [103] = 4,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(25), 1,
      sym_name,
    STATE(83), 1,
      sym__policy_name,
    ACTIONS(23), 10,
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
  [125] = 8,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(27), 1,
      sym_name,
    ACTIONS(31), 1,
      anon_sym_LBRACK,
    ACTIONS(33), 1,
      sym_number,
    ACTIONS(35), 1,
      sym_string,
    STATE(49), 1,
      sym_expression,
    ACTIONS(29), 2,
      anon_sym_true,
      anon_sym_false,
    STATE(33), 5,
      sym__value,
      sym_quantity,
      sym_identifier,
      sym_boolean,
      sym_list,
  [155] = 8,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(27), 1,
      sym_name,
    ACTIONS(31), 1,
      anon_sym_LBRACK,
    ACTIONS(37), 1,
      anon_sym_RBRACK,
    ACTIONS(39), 1,
      sym_number,
    ACTIONS(41), 1,
      sym_string,
    ACTIONS(29), 2,
      anon_sym_true,
      anon_sym_false,
    STATE(56), 5,
      sym__value,
      sym_quantity,
      sym_identifier,
      sym_boolean,
      sym_list,
  [185] = 7,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(27), 1,
      sym_name,
    ACTIONS(31), 1,
      anon_sym_LBRACK,
    ACTIONS(33), 1,
      sym_number,
    ACTIONS(43), 1,
      sym_string,
    ACTIONS(29), 2,
      anon_sym_true,
      anon_sym_false,
    STATE(44), 5,
      sym__value,
      sym_quantity,
      sym_identifier,
      sym_boolean,
      sym_list,
  [212] = 3,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(45), 4,
      anon_sym_when,
      anon_sym_trigger,
      anon_sym_rebalance,
      sym_name,
    ACTIONS(47), 7,
      anon_sym_SEMI,
      anon_sym_LBRACE,
      anon_sym_RBRACE,
      anon_sym_PIPE,
      anon_sym_COLON,
      anon_sym_COMMA,
      anon_sym_RBRACK,
  [231] = 7,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(27), 1,
      sym_name,
    ACTIONS(31), 1,
      anon_sym_LBRACK,
    ACTIONS(33), 1,
      sym_number,
    ACTIONS(49), 1,
      sym_string,
    ACTIONS(29), 2,
      anon_sym_true,
      anon_sym_false,
    STATE(75), 5,
      sym__value,
      sym_quantity,
      sym_identifier,
      sym_boolean,
      sym_list,
  [258] = 3,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(51), 4,
      anon_sym_when,
      anon_sym_trigger,
      anon_sym_rebalance,
      sym_name,
    ACTIONS(53), 7,
      anon_sym_SEMI,
      anon_sym_LBRACE,
      anon_sym_RBRACE,
      anon_sym_PIPE,
      anon_sym_COLON,
      anon_sym_COMMA,
      anon_sym_RBRACK,
  [277] = 7,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(27), 1,
      sym_name,
    ACTIONS(31), 1,
      anon_sym_LBRACK,
    ACTIONS(55), 1,
      sym_number,
    ACTIONS(57), 1,
      sym_string,
    ACTIONS(29), 2,
      anon_sym_true,
      anon_sym_false,
    STATE(47), 5,
      sym__value,
      sym_quantity,
      sym_identifier,
      sym_boolean,
      sym_list,
  [304] = 7,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(27), 1,
      sym_name,
    ACTIONS(31), 1,
      anon_sym_LBRACK,
    ACTIONS(39), 1,
      sym_number,
    ACTIONS(59), 1,
      sym_string,
    ACTIONS(29), 2,
      anon_sym_true,
      anon_sym_false,
    STATE(64), 5,
      sym__value,
      sym_quantity,
      sym_identifier,
      sym_boolean,
      sym_list,
  [331] = 7,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(27), 1,
      sym_name,
    ACTIONS(31), 1,
      anon_sym_LBRACK,
    ACTIONS(33), 1,
      sym_number,
    ACTIONS(61), 1,
      sym_string,
    ACTIONS(29), 2,
      anon_sym_true,
      anon_sym_false,
    STATE(82), 5,
      sym__value,
      sym_quantity,
      sym_identifier,
      sym_boolean,
      sym_list,
  [358] = 3,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(63), 4,
      anon_sym_when,
      anon_sym_trigger,
      anon_sym_rebalance,
      sym_name,
    ACTIONS(65), 6,
      anon_sym_SEMI,
      anon_sym_RBRACE,
      anon_sym_PIPE,
      anon_sym_COLON,
      anon_sym_COMMA,
      anon_sym_RBRACK,
  [376] = 8,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(67), 1,
      sym_name,
    ACTIONS(69), 1,
      anon_sym_SEMI,
    ACTIONS(71), 1,
      anon_sym_trigger,
    ACTIONS(73), 1,
      anon_sym_rebalance,
    ACTIONS(75), 1,
      anon_sym_RBRACE,
    STATE(70), 1,
      sym_target,
    STATE(20), 4,
      sym_set_action,
      sym_trigger_action,
      sym_rebalance_action,
      aux_sym_rule_repeat1,
  [404] = 3,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(77), 4,
      anon_sym_when,
      anon_sym_trigger,
      anon_sym_rebalance,
      sym_name,
    ACTIONS(79), 6,
      anon_sym_SEMI,
      anon_sym_RBRACE,
      anon_sym_PIPE,
      anon_sym_COLON,
      anon_sym_COMMA,
      anon_sym_RBRACK,
  [422] = 3,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(81), 4,
      anon_sym_when,
      anon_sym_trigger,
      anon_sym_rebalance,
      sym_name,
    ACTIONS(83), 6,
      anon_sym_SEMI,
      anon_sym_RBRACE,
      anon_sym_PIPE,
      anon_sym_COLON,
      anon_sym_COMMA,
      anon_sym_RBRACK,
  [440] = 8,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(67), 1,
      sym_name,
    ACTIONS(71), 1,
      anon_sym_trigger,
    ACTIONS(73), 1,
      anon_sym_rebalance,
    ACTIONS(85), 1,
      anon_sym_SEMI,
    ACTIONS(87), 1,
      anon_sym_RBRACE,
    STATE(70), 1,
      sym_target,
    STATE(21), 4,
      sym_set_action,
      sym_trigger_action,
      sym_rebalance_action,
      aux_sym_rule_repeat1,
  [468] = 8,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(89), 1,
      sym_name,
    ACTIONS(92), 1,
      anon_sym_SEMI,
    ACTIONS(95), 1,
      anon_sym_trigger,
    ACTIONS(98), 1,
      anon_sym_rebalance,
    ACTIONS(101), 1,
      anon_sym_RBRACE,
    STATE(70), 1,
      sym_target,
    STATE(21), 4,
      sym_set_action,
      sym_trigger_action,
      sym_rebalance_action,
      aux_sym_rule_repeat1,
  [496] = 8,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(67), 1,
      sym_name,
    ACTIONS(71), 1,
      anon_sym_trigger,
    ACTIONS(73), 1,
      anon_sym_rebalance,
    ACTIONS(103), 1,
      anon_sym_SEMI,
    ACTIONS(105), 1,
      anon_sym_RBRACE,
    STATE(70), 1,
      sym_target,
    STATE(24), 4,
      sym_set_action,
      sym_trigger_action,
      sym_rebalance_action,
      aux_sym_rule_repeat1,
  [524] = 3,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(107), 4,
      anon_sym_when,
      anon_sym_trigger,
      anon_sym_rebalance,
      sym_name,
    ACTIONS(109), 6,
      anon_sym_SEMI,
      anon_sym_RBRACE,
      anon_sym_PIPE,
      anon_sym_COLON,
      anon_sym_COMMA,
      anon_sym_RBRACK,
  [542] = 8,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(67), 1,
      sym_name,
    ACTIONS(71), 1,
      anon_sym_trigger,
    ACTIONS(73), 1,
      anon_sym_rebalance,
    ACTIONS(85), 1,
      anon_sym_SEMI,
    ACTIONS(111), 1,
      anon_sym_RBRACE,
    STATE(70), 1,
      sym_target,
    STATE(21), 4,
      sym_set_action,
      sym_trigger_action,
      sym_rebalance_action,
      aux_sym_rule_repeat1,
  [570] = 3,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(113), 4,
      anon_sym_when,
      anon_sym_trigger,
      anon_sym_rebalance,
      sym_name,
    ACTIONS(115), 6,
      anon_sym_SEMI,
      anon_sym_RBRACE,
      anon_sym_PIPE,
      anon_sym_COLON,
      anon_sym_COMMA,
      anon_sym_RBRACK,
  [588] = 7,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(9), 1,
      anon_sym_version,
    ACTIONS(11), 1,
      anon_sym_import,
    ACTIONS(13), 1,
      anon_sym_policy,
    ACTIONS(117), 1,
      ts_builtin_sym_end,
    ACTIONS(119), 1,
      anon_sym_SEMI,
    STATE(27), 4,
      sym_version,
      sym_import,
      sym_policy,
      aux_sym_source_file_repeat1,
  [613] = 7,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(121), 1,
      ts_builtin_sym_end,
    ACTIONS(123), 1,
      anon_sym_SEMI,
    ACTIONS(126), 1,
      anon_sym_version,
    ACTIONS(129), 1,
      anon_sym_import,
    ACTIONS(132), 1,
      anon_sym_policy,
    STATE(27), 4,
      sym_version,
      sym_import,
      sym_policy,
      aux_sym_source_file_repeat1,
  [638] = 6,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(135), 1,
      sym_name,
    ACTIONS(138), 1,
      anon_sym_SEMI,
    ACTIONS(141), 1,
      anon_sym_when,
    ACTIONS(144), 1,
      anon_sym_RBRACE,
    STATE(28), 3,
      sym_param,
      sym_rule,
      aux_sym_block_repeat1,
  [659] = 6,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(146), 1,
      sym_name,
    ACTIONS(148), 1,
      anon_sym_SEMI,
    ACTIONS(150), 1,
      anon_sym_when,
    ACTIONS(152), 1,
      anon_sym_RBRACE,
    STATE(28), 3,
      sym_param,
      sym_rule,
      aux_sym_block_repeat1,
  [680] = 4,
    ACTIONS(3), 1,
      sym_comment,
    STATE(74), 1,
      sym_operator,
    ACTIONS(154), 2,
      anon_sym_LT,
      anon_sym_GT,
    ACTIONS(156), 4,
      anon_sym_LT_EQ,
      anon_sym_GT_EQ,
      anon_sym_BANG_EQ,
      anon_sym_EQ_EQ,
  [697] = 6,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(146), 1,
      sym_name,
    ACTIONS(150), 1,
      anon_sym_when,
    ACTIONS(158), 1,
      anon_sym_SEMI,
    ACTIONS(160), 1,
      anon_sym_RBRACE,
    STATE(29), 3,
      sym_param,
      sym_rule,
      aux_sym_block_repeat1,
  [718] = 3,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(162), 3,
      anon_sym_when,
      anon_sym_for,
      sym_name,
    ACTIONS(164), 3,
      anon_sym_SEMI,
      anon_sym_LBRACE,
      anon_sym_RBRACE,
  [732] = 5,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(170), 1,
      anon_sym_PIPE,
    ACTIONS(172), 1,
      anon_sym_COLON,
    ACTIONS(166), 2,
      anon_sym_when,
      sym_name,
    ACTIONS(168), 2,
      anon_sym_SEMI,
      anon_sym_RBRACE,
  [750] = 2,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(174), 5,
      ts_builtin_sym_end,
      anon_sym_SEMI,
      anon_sym_version,
      anon_sym_import,
      anon_sym_policy,
  [761] = 3,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(178), 2,
      anon_sym_SEMI,
      anon_sym_RBRACE,
    ACTIONS(176), 3,
      anon_sym_trigger,
      anon_sym_rebalance,
      sym_name,
  [774] = 5,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(180), 1,
      sym_name,
    ACTIONS(182), 1,
      anon_sym_SEMI,
    ACTIONS(184), 1,
      anon_sym_RBRACE,
    STATE(40), 2,
      sym_block,
      aux_sym_policy_repeat1,
  [791] = 2,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(186), 5,
      ts_builtin_sym_end,
      anon_sym_SEMI,
      anon_sym_version,
      anon_sym_import,
      anon_sym_policy,
  [802] = 5,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(180), 1,
      sym_name,
    ACTIONS(188), 1,
      anon_sym_SEMI,
    ACTIONS(190), 1,
      anon_sym_RBRACE,
    STATE(41), 2,
      sym_block,
      aux_sym_policy_repeat1,
  [819] = 3,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(194), 2,
      anon_sym_SEMI,
      anon_sym_RBRACE,
    ACTIONS(192), 3,
      anon_sym_trigger,
      anon_sym_rebalance,
      sym_name,
  [832] = 5,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(180), 1,
      sym_name,
    ACTIONS(196), 1,
      anon_sym_SEMI,
    ACTIONS(198), 1,
      anon_sym_RBRACE,
    STATE(42), 2,
      sym_block,
      aux_sym_policy_repeat1,
  [849] = 5,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(180), 1,
      sym_name,
    ACTIONS(196), 1,
      anon_sym_SEMI,
    ACTIONS(200), 1,
      anon_sym_RBRACE,
    STATE(42), 2,
      sym_block,
      aux_sym_policy_repeat1,
  [866] = 5,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(202), 1,
      sym_name,
    ACTIONS(205), 1,
      anon_sym_SEMI,
    ACTIONS(208), 1,
      anon_sym_RBRACE,
    STATE(42), 2,
      sym_block,
      aux_sym_policy_repeat1,
  [883] = 2,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(210), 5,
      ts_builtin_sym_end,
      anon_sym_SEMI,
      anon_sym_version,
      anon_sym_import,
      anon_sym_policy,
  [894] = 4,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(216), 1,
      anon_sym_COLON,
    ACTIONS(212), 2,
      anon_sym_when,
      sym_name,
    ACTIONS(214), 2,
      anon_sym_SEMI,
      anon_sym_RBRACE,
  [909] = 2,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(218), 5,
      ts_builtin_sym_end,
      anon_sym_SEMI,
      anon_sym_version,
      anon_sym_import,
      anon_sym_policy,
  [920] = 2,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(220), 5,
      ts_builtin_sym_end,
      anon_sym_SEMI,
      anon_sym_version,
      anon_sym_import,
      anon_sym_policy,
  [931] = 3,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(224), 2,
      anon_sym_SEMI,
      anon_sym_RBRACE,
    ACTIONS(222), 3,
      anon_sym_trigger,
      anon_sym_rebalance,
      sym_name,
  [944] = 2,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(226), 5,
      ts_builtin_sym_end,
      anon_sym_SEMI,
      anon_sym_version,
      anon_sym_import,
      anon_sym_policy,
  [955] = 3,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(228), 2,
      anon_sym_when,
      sym_name,
    ACTIONS(230), 2,
      anon_sym_SEMI,
      anon_sym_RBRACE,
  [967] = 3,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(232), 2,
      anon_sym_when,
      sym_name,
    ACTIONS(234), 2,
      anon_sym_SEMI,
      anon_sym_RBRACE,
  [979] = 3,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(236), 2,
      anon_sym_when,
      sym_name,
    ACTIONS(238), 2,
      anon_sym_SEMI,
      anon_sym_RBRACE,
  [991] = 3,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(240), 2,
      anon_sym_when,
      sym_name,
    ACTIONS(242), 2,
      anon_sym_SEMI,
      anon_sym_RBRACE,
  [1003] = 3,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(244), 2,
      anon_sym_when,
      sym_name,
    ACTIONS(246), 2,
      anon_sym_SEMI,
      anon_sym_RBRACE,
  [1015] = 3,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(248), 2,
      anon_sym_when,
      sym_name,
    ACTIONS(250), 2,
      anon_sym_SEMI,
      anon_sym_RBRACE,
  [1027] = 3,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(252), 2,
      anon_sym_when,
      sym_name,
    ACTIONS(254), 2,
      anon_sym_SEMI,
      anon_sym_RBRACE,
  [1039] = 4,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(256), 1,
      anon_sym_COMMA,
    ACTIONS(258), 1,
      anon_sym_RBRACK,
    STATE(59), 1,
      aux_sym_list_repeat1,
  [1052] = 2,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(260), 3,
      anon_sym_SEMI,
      anon_sym_RBRACE,
      sym_name,
  [1061] = 4,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(262), 1,
      anon_sym_COMMA,
    ACTIONS(265), 1,
      anon_sym_RBRACK,
    STATE(58), 1,
      aux_sym_list_repeat1,
  [1074] = 4,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(256), 1,
      anon_sym_COMMA,
    ACTIONS(267), 1,
      anon_sym_RBRACK,
    STATE(58), 1,
      aux_sym_list_repeat1,
  [1087] = 2,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(269), 3,
      anon_sym_SEMI,
      anon_sym_RBRACE,
      sym_name,
  [1096] = 3,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(271), 1,
      anon_sym_for,
    ACTIONS(273), 1,
      anon_sym_LBRACE,
  [1106] = 3,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(39), 1,
      sym_number,
    STATE(79), 1,
      sym_quantity,
  [1116] = 3,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(275), 1,
      anon_sym_EQ,
    ACTIONS(277), 1,
      anon_sym_DOT,
  [1126] = 2,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(265), 2,
      anon_sym_COMMA,
      anon_sym_RBRACK,
  [1134] = 3,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(279), 1,
      anon_sym_extends,
    ACTIONS(281), 1,
      anon_sym_LBRACE,
  [1144] = 3,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(283), 1,
      sym_name,
    STATE(54), 1,
      sym_condition,
  [1154] = 3,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(283), 1,
      sym_name,
    STATE(55), 1,
      sym_condition,
  [1164] = 2,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(285), 2,
      anon_sym_extends,
      anon_sym_LBRACE,
  [1172] = 3,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(283), 1,
      sym_name,
    STATE(61), 1,
      sym_condition,
  [1182] = 2,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(287), 1,
      anon_sym_EQ,
  [1189] = 2,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(289), 1,
      anon_sym_EQ,
  [1196] = 2,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(291), 1,
      ts_builtin_sym_end,
  [1203] = 2,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(293), 1,
      sym_number,
  [1210] = 2,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(295), 1,
      sym_number,
  [1217] = 2,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(297), 1,
      anon_sym_when,
  [1224] = 2,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(299), 1,
      sym_string,
  [1231] = 2,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(301), 1,
      anon_sym_LBRACE,
  [1238] = 2,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(303), 1,
      anon_sym_EQ,
  [1245] = 2,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(305), 1,
      anon_sym_LBRACE,
  [1252] = 2,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(307), 1,
      sym_name,
  [1259] = 2,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(309), 1,
      sym_name,
  [1266] = 2,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(311), 1,
      anon_sym_when,
  [1273] = 2,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(313), 1,
      anon_sym_LBRACE,
  [1280] = 2,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(315), 1,
      sym_number,
  [1287] = 2,
    ACTIONS(3), 1,
      sym_comment,
    ACTIONS(317), 1,
      sym_name,
};

static const uint32_t ts_small_parse_table_map[] = {
  [SMALL_STATE(2)] = 0,
  [SMALL_STATE(3)] = 29,
  [SMALL_STATE(4)] = 57,
  [SMALL_STATE(5)] = 81,
  [SMALL_STATE(6)] = 103,
  [SMALL_STATE(7)] = 125,
  [SMALL_STATE(8)] = 155,
  [SMALL_STATE(9)] = 185,
  [SMALL_STATE(10)] = 212,
  [SMALL_STATE(11)] = 231,
  [SMALL_STATE(12)] = 258,
  [SMALL_STATE(13)] = 277,
  [SMALL_STATE(14)] = 304,
  [SMALL_STATE(15)] = 331,
  [SMALL_STATE(16)] = 358,
  [SMALL_STATE(17)] = 376,
  [SMALL_STATE(18)] = 404,
  [SMALL_STATE(19)] = 422,
  [SMALL_STATE(20)] = 440,
  [SMALL_STATE(21)] = 468,
  [SMALL_STATE(22)] = 496,
  [SMALL_STATE(23)] = 524,
  [SMALL_STATE(24)] = 542,
  [SMALL_STATE(25)] = 570,
  [SMALL_STATE(26)] = 588,
  [SMALL_STATE(27)] = 613,
  [SMALL_STATE(28)] = 638,
  [SMALL_STATE(29)] = 659,
  [SMALL_STATE(30)] = 680,
  [SMALL_STATE(31)] = 697,
  [SMALL_STATE(32)] = 718,
  [SMALL_STATE(33)] = 732,
  [SMALL_STATE(34)] = 750,
  [SMALL_STATE(35)] = 761,
  [SMALL_STATE(36)] = 774,
  [SMALL_STATE(37)] = 791,
  [SMALL_STATE(38)] = 802,
  [SMALL_STATE(39)] = 819,
  [SMALL_STATE(40)] = 832,
  [SMALL_STATE(41)] = 849,
  [SMALL_STATE(42)] = 866,
  [SMALL_STATE(43)] = 883,
  [SMALL_STATE(44)] = 894,
  [SMALL_STATE(45)] = 909,
  [SMALL_STATE(46)] = 920,
  [SMALL_STATE(47)] = 931,
  [SMALL_STATE(48)] = 944,
  [SMALL_STATE(49)] = 955,
  [SMALL_STATE(50)] = 967,
  [SMALL_STATE(51)] = 979,
  [SMALL_STATE(52)] = 991,
  [SMALL_STATE(53)] = 1003,
  [SMALL_STATE(54)] = 1015,
  [SMALL_STATE(55)] = 1027,
  [SMALL_STATE(56)] = 1039,
  [SMALL_STATE(57)] = 1052,
  [SMALL_STATE(58)] = 1061,
  [SMALL_STATE(59)] = 1074,
  [SMALL_STATE(60)] = 1087,
  [SMALL_STATE(61)] = 1096,
  [SMALL_STATE(62)] = 1106,
  [SMALL_STATE(63)] = 1116,
  [SMALL_STATE(64)] = 1126,
  [SMALL_STATE(65)] = 1134,
  [SMALL_STATE(66)] = 1144,
  [SMALL_STATE(67)] = 1154,
  [SMALL_STATE(68)] = 1164,
  [SMALL_STATE(69)] = 1172,
  [SMALL_STATE(70)] = 1182,
  [SMALL_STATE(71)] = 1189,
  [SMALL_STATE(72)] = 1196,
  [SMALL_STATE(73)] = 1203,
  [SMALL_STATE(74)] = 1210,
  [SMALL_STATE(75)] = 1217,
  [SMALL_STATE(76)] = 1224,
  [SMALL_STATE(77)] = 1231,
  [SMALL_STATE(78)] = 1238,
  [SMALL_STATE(79)] = 1245,
  [SMALL_STATE(80)] = 1252,
  [SMALL_STATE(81)] = 1259,
  [SMALL_STATE(82)] = 1266,
  [SMALL_STATE(83)] = 1273,
  [SMALL_STATE(84)] = 1280,
  [SMALL_STATE(85)] = 1287,
};

static const TSParseActionEntry ts_parse_actions[] = {
  [0] = {.entry = {.count = 0, .reusable = false}},
  [1] = {.entry = {.count = 1, .reusable = false}}, RECOVER(),
  [3] = {.entry = {.count = 1, .reusable = true}}, SHIFT_EXTRA(),
  [5] = {.entry = {.count = 1, .reusable = true}}, REDUCE(sym_source_file, 0, 0, 0),
  [7] = {.entry = {.count = 1, .reusable = true}}, SHIFT(26),
  [9] = {.entry = {.count = 1, .reusable = true}}, SHIFT(73),
  [11] = {.entry = {.count = 1, .reusable = true}}, SHIFT(76),
  [13] = {.entry = {.count = 1, .reusable = true}}, SHIFT(5),
  [15] = {.entry = {.count = 1, .reusable = false}}, REDUCE(sym_quantity, 1, 0, 0),
  [17] = {.entry = {.count = 1, .reusable = true}}, REDUCE(sym_quantity, 1, 0, 0),
  [19] = {.entry = {.count = 1, .reusable = false}}, SHIFT(10),
  [21] = {.entry = {.count = 1, .reusable = false}}, SHIFT(65),
  [23] = {.entry = {.count = 1, .reusable = false}}, SHIFT(68),
  [25] = {.entry = {.count = 1, .reusable = false}}, SHIFT(83),
  [27] = {.entry = {.count = 1, .reusable = false}}, SHIFT(18),
  [29] = {.entry = {.count = 1, .reusable = false}}, SHIFT(16),
  [31] = {.entry = {.count = 1, .reusable = true}}, SHIFT(8),
  [33] = {.entry = {.count = 1, .reusable = true}}, SHIFT(2),
  [35] = {.entry = {.count = 1, .reusable = true}}, SHIFT(33),
  [37] = {.entry = {.count = 1, .reusable = true}}, SHIFT(19),
  [39] = {.entry = {.count = 1, .reusable = true}}, SHIFT(4),
  [41] = {.entry = {.count = 1, .reusable = true}}, SHIFT(56),
  [43] = {.entry = {.count = 1, .reusable = true}}, SHIFT(44),
  [45] = {.entry = {.count = 1, .reusable = false}}, REDUCE(sym_unit, 1, 0, 0),
  [47] = {.entry = {.count = 1, .reusable = true}}, REDUCE(sym_unit, 1, 0, 0),
  [49] = {.entry = {.count = 1, .reusable = true}}, SHIFT(75),
  [51] = {.entry = {.count = 1, .reusable = false}}, REDUCE(sym_quantity, 2, 0, 10),
  [53] = {.entry = {.count = 1, .reusable = true}}, REDUCE(sym_quantity, 2, 0, 10),
  [55] = {.entry = {.count = 1, .reusable = true}}, SHIFT(3),
  [57] = {.entry = {.count = 1, .reusable = true}}, SHIFT(47),
  [59] = {.entry = {.count = 1, .reusable = true}}, SHIFT(64),
  [61] = {.entry = {.count = 1, .reusable = true}}, SHIFT(82),
  [63] = {.entry = {.count = 1, .reusable = false}}, REDUCE(sym_boolean, 1, 0, 0),
  [65] = {.entry = {.count = 1, .reusable = true}}, REDUCE(sym_boolean, 1, 0, 0),
  [67] = {.entry = {.count = 1, .reusable = false}}, SHIFT(63),
  [69] = {.entry = {.count = 1, .reusable = true}}, SHIFT(20),
  [71] = {.entry = {.count = 1, .reusable = false}}, SHIFT(80),
  [73] = {.entry = {.count = 1, .reusable = false}}, SHIFT(81),
  [75] = {.entry = {.count = 1, .reusable = true}}, SHIFT(50),
  [77] = {.entry = {.count = 1, .reusable = false}}, REDUCE(sym_identifier, 1, 0, 0),
  [79] = {.entry = {.count = 1, .reusable = true}}, REDUCE(sym_identifier, 1, 0, 0),
  [81] = {.entry = {.count = 1, .reusable = false}}, REDUCE(sym_list, 2, 0, 0),
  [83] = {.entry = {.count = 1, .reusable = true}}, REDUCE(sym_list, 2, 0, 0),
  [85] = {.entry = {.count = 1, .reusable = true}}, SHIFT(21),
  [87] = {.entry = {.count = 1, .reusable = true}}, SHIFT(53),
  [89] = {.entry = {.count = 2, .reusable = false}}, REDUCE(aux_sym_rule_repeat1, 2, 0, 0), SHIFT_REPEAT(63),
  [92] = {.entry = {.count = 2, .reusable = true}}, REDUCE(aux_sym_rule_repeat1, 2, 0, 0), SHIFT_REPEAT(21),
  [95] = {.entry = {.count = 2, .reusable = false}}, REDUCE(aux_sym_rule_repeat1, 2, 0, 0), SHIFT_REPEAT(80),
  [98] = {.entry = {.count = 2, .reusable = false}}, REDUCE(aux_sym_rule_repeat1, 2, 0, 0), SHIFT_REPEAT(81),
  [101] = {.entry = {.count = 1, .reusable = true}}, REDUCE(aux_sym_rule_repeat1, 2, 0, 0),
  [103] = {.entry = {.count = 1, .reusable = true}}, SHIFT(24),
  [105] = {.entry = {.count = 1, .reusable = true}}, SHIFT(51),
  [107] = {.entry = {.count = 1, .reusable = false}}, REDUCE(sym_list, 3, 0, 0),
  [109] = {.entry = {.count = 1, .reusable = true}}, REDUCE(sym_list, 3, 0, 0),
  [111] = {.entry = {.count = 1, .reusable = true}}, SHIFT(52),
  [113] = {.entry = {.count = 1, .reusable = false}}, REDUCE(sym_list, 4, 0, 0),
  [115] = {.entry = {.count = 1, .reusable = true}}, REDUCE(sym_list, 4, 0, 0),
  [117] = {.entry = {.count = 1, .reusable = true}}, REDUCE(sym_source_file, 1, 0, 0),
  [119] = {.entry = {.count = 1, .reusable = true}}, SHIFT(27),
  [121] = {.entry = {.count = 1, .reusable = true}}, REDUCE(aux_sym_source_file_repeat1, 2, 0, 0),
  [123] = {.entry = {.count = 2, .reusable = true}}, REDUCE(aux_sym_source_file_repeat1, 2, 0, 0), SHIFT_REPEAT(27),
  [126] = {.entry = {.count = 2, .reusable = true}}, REDUCE(aux_sym_source_file_repeat1, 2, 0, 0), SHIFT_REPEAT(73),
  [129] = {.entry = {.count = 2, .reusable = true}}, REDUCE(aux_sym_source_file_repeat1, 2, 0, 0), SHIFT_REPEAT(76),
  [132] = {.entry = {.count = 2, .reusable = true}}, REDUCE(aux_sym_source_file_repeat1, 2, 0, 0), SHIFT_REPEAT(5),
  [135] = {.entry = {.count = 2, .reusable = false}}, REDUCE(aux_sym_block_repeat1, 2, 0, 0), SHIFT_REPEAT(71),
  [138] = {.entry = {.count = 2, .reusable = true}}, REDUCE(aux_sym_block_repeat1, 2, 0, 0), SHIFT_REPEAT(28),
  [141] = {.entry = {.count = 2, .reusable = false}}, REDUCE(aux_sym_block_repeat1, 2, 0, 0), SHIFT_REPEAT(69),
  [144] = {.entry = {.count = 1, .reusable = true}}, REDUCE(aux_sym_block_repeat1, 2, 0, 0),
  [146] = {.entry = {.count = 1, .reusable = false}}, SHIFT(71),
  [148] = {.entry = {.count = 1, .reusable = true}}, SHIFT(28),
  [150] = {.entry = {.count = 1, .reusable = false}}, SHIFT(69),
  [152] = {.entry = {.count = 1, .reusable = true}}, SHIFT(57),
  [154] = {.entry = {.count = 1, .reusable = false}}, SHIFT(84),
  [156] = {.entry = {.count = 1, .reusable = true}}, SHIFT(84),
  [158] = {.entry = {.count = 1, .reusable = true}}, SHIFT(29),
  [160] = {.entry = {.count = 1, .reusable = true}}, SHIFT(60),
  [162] = {.entry = {.count = 1, .reusable = false}}, REDUCE(sym_condition, 3, 0, 8),
  [164] = {.entry = {.count = 1, .reusable = true}}, REDUCE(sym_condition, 3, 0, 8),
  [166] = {.entry = {.count = 1, .reusable = false}}, REDUCE(sym_expression, 1, 0, 0),
  [168] = {.entry = {.count = 1, .reusable = true}}, REDUCE(sym_expression, 1, 0, 0),
  [170] = {.entry = {.count = 1, .reusable = true}}, SHIFT(9),
  [172] = {.entry = {.count = 1, .reusable = true}}, SHIFT(11),
  [174] = {.entry = {.count = 1, .reusable = true}}, REDUCE(sym_policy, 6, 0, 5),
  [176] = {.entry = {.count = 1, .reusable = false}}, REDUCE(sym_rebalance_action, 2, 0, 11),
  [178] = {.entry = {.count = 1, .reusable = true}}, REDUCE(sym_rebalance_action, 2, 0, 11),
  [180] = {.entry = {.count = 1, .reusable = true}}, SHIFT(77),
  [182] = {.entry = {.count = 1, .reusable = true}}, SHIFT(40),
  [184] = {.entry = {.count = 1, .reusable = true}}, SHIFT(37),
  [186] = {.entry = {.count = 1, .reusable = true}}, REDUCE(sym_policy, 4, 0, 4),
  [188] = {.entry = {.count = 1, .reusable = true}}, SHIFT(41),
  [190] = {.entry = {.count = 1, .reusable = true}}, SHIFT(34),
  [192] = {.entry = {.count = 1, .reusable = false}}, REDUCE(sym_trigger_action, 2, 0, 4),
  [194] = {.entry = {.count = 1, .reusable = true}}, REDUCE(sym_trigger_action, 2, 0, 4),
  [196] = {.entry = {.count = 1, .reusable = true}}, SHIFT(42),
  [198] = {.entry = {.count = 1, .reusable = true}}, SHIFT(43),
  [200] = {.entry = {.count = 1, .reusable = true}}, SHIFT(45),
  [202] = {.entry = {.count = 2, .reusable = true}}, REDUCE(aux_sym_policy_repeat1, 2, 0, 0), SHIFT_REPEAT(77),
  [205] = {.entry = {.count = 2, .reusable = true}}, REDUCE(aux_sym_policy_repeat1, 2, 0, 0), SHIFT_REPEAT(42),
  [208] = {.entry = {.count = 1, .reusable = true}}, REDUCE(aux_sym_policy_repeat1, 2, 0, 0),
  [210] = {.entry = {.count = 1, .reusable = true}}, REDUCE(sym_policy, 5, 0, 4),
  [212] = {.entry = {.count = 1, .reusable = false}}, REDUCE(sym_expression, 3, 0, 12),
  [214] = {.entry = {.count = 1, .reusable = true}}, REDUCE(sym_expression, 3, 0, 12),
  [216] = {.entry = {.count = 1, .reusable = true}}, SHIFT(15),
  [218] = {.entry = {.count = 1, .reusable = true}}, REDUCE(sym_policy, 7, 0, 5),
  [220] = {.entry = {.count = 1, .reusable = true}}, REDUCE(sym_version, 2, 0, 1),
  [222] = {.entry = {.count = 1, .reusable = false}}, REDUCE(sym_set_action, 3, 0, 15),
  [224] = {.entry = {.count = 1, .reusable = true}}, REDUCE(sym_set_action, 3, 0, 15),
  [226] = {.entry = {.count = 1, .reusable = true}}, REDUCE(sym_import, 2, 0, 2),
  [228] = {.entry = {.count = 1, .reusable = false}}, REDUCE(sym_param, 3, 0, 7),
  [230] = {.entry = {.count = 1, .reusable = true}}, REDUCE(sym_param, 3, 0, 7),
  [232] = {.entry = {.count = 1, .reusable = false}}, REDUCE(sym_rule, 4, 0, 9),
  [234] = {.entry = {.count = 1, .reusable = true}}, REDUCE(sym_rule, 4, 0, 9),
  [236] = {.entry = {.count = 1, .reusable = false}}, REDUCE(sym_rule, 6, 0, 13),
  [238] = {.entry = {.count = 1, .reusable = true}}, REDUCE(sym_rule, 6, 0, 13),
  [240] = {.entry = {.count = 1, .reusable = false}}, REDUCE(sym_rule, 7, 0, 13),
  [242] = {.entry = {.count = 1, .reusable = true}}, REDUCE(sym_rule, 7, 0, 13),
  [244] = {.entry = {.count = 1, .reusable = false}}, REDUCE(sym_rule, 5, 0, 9),
  [246] = {.entry = {.count = 1, .reusable = true}}, REDUCE(sym_rule, 5, 0, 9),
  [248] = {.entry = {.count = 1, .reusable = false}}, REDUCE(sym_expression, 5, 0, 16),
  [250] = {.entry = {.count = 1, .reusable = true}}, REDUCE(sym_expression, 5, 0, 16),
  [252] = {.entry = {.count = 1, .reusable = false}}, REDUCE(sym_expression, 7, 0, 17),
  [254] = {.entry = {.count = 1, .reusable = true}}, REDUCE(sym_expression, 7, 0, 17),
  [256] = {.entry = {.count = 1, .reusable = true}}, SHIFT(14),
  [258] = {.entry = {.count = 1, .reusable = true}}, SHIFT(23),
  [260] = {.entry = {.count = 1, .reusable = true}}, REDUCE(sym_block, 4, 0, 6),
  [262] = {.entry = {.count = 2, .reusable = true}}, REDUCE(aux_sym_list_repeat1, 2, 0, 0), SHIFT_REPEAT(14),
  [265] = {.entry = {.count = 1, .reusable = true}}, REDUCE(aux_sym_list_repeat1, 2, 0, 0),
  [267] = {.entry = {.count = 1, .reusable = true}}, SHIFT(25),
  [269] = {.entry = {.count = 1, .reusable = true}}, REDUCE(sym_block, 3, 0, 6),
  [271] = {.entry = {.count = 1, .reusable = true}}, SHIFT(62),
  [273] = {.entry = {.count = 1, .reusable = true}}, SHIFT(17),
  [275] = {.entry = {.count = 1, .reusable = true}}, REDUCE(sym_target, 1, 0, 6),
  [277] = {.entry = {.count = 1, .reusable = true}}, SHIFT(85),
  [279] = {.entry = {.count = 1, .reusable = true}}, SHIFT(6),
  [281] = {.entry = {.count = 1, .reusable = true}}, SHIFT(36),
  [283] = {.entry = {.count = 1, .reusable = true}}, SHIFT(30),
  [285] = {.entry = {.count = 1, .reusable = true}}, REDUCE(sym__policy_name, 1, 0, 3),
  [287] = {.entry = {.count = 1, .reusable = true}}, SHIFT(13),
  [289] = {.entry = {.count = 1, .reusable = true}}, SHIFT(7),
  [291] = {.entry = {.count = 1, .reusable = true}},  ACCEPT_INPUT(),
  [293] = {.entry = {.count = 1, .reusable = true}}, SHIFT(46),
  [295] = {.entry = {.count = 1, .reusable = true}}, SHIFT(32),
  [297] = {.entry = {.count = 1, .reusable = true}}, SHIFT(66),
  [299] = {.entry = {.count = 1, .reusable = true}}, SHIFT(48),
  [301] = {.entry = {.count = 1, .reusable = true}}, SHIFT(31),
  [303] = {.entry = {.count = 1, .reusable = true}}, REDUCE(sym_target, 3, 0, 14),
  [305] = {.entry = {.count = 1, .reusable = true}}, SHIFT(22),
  [307] = {.entry = {.count = 1, .reusable = true}}, SHIFT(39),
  [309] = {.entry = {.count = 1, .reusable = true}}, SHIFT(35),
  [311] = {.entry = {.count = 1, .reusable = true}}, SHIFT(67),
  [313] = {.entry = {.count = 1, .reusable = true}}, SHIFT(38),
  [315] = {.entry = {.count = 1, .reusable = true}}, REDUCE(sym_operator, 1, 0, 0),
  [317] = {.entry = {.count = 1, .reusable = true}}, SHIFT(78),
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
