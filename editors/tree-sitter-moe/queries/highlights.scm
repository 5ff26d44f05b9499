; MoE-PolicyLang highlights (capture names of nvim-treesitter; Helix and Zed map the same
; names, a name a theme lacks falls back to its parent: @type.definition -> @type)

[ "version" "import" "policy" "extends" "when" "for" "trigger" "rebalance" ] @keyword

(policy name: (name) @type.definition)
(policy parent: (name) @type)
(block name: (name) @module)
(param name: (name) @property)
(target block: (name) @module)
(target name: (name) @property)
(condition metric: (name) @variable.builtin)
(trigger_action name: (name) @function.builtin)
(rebalance_action allocation: (name) @constant)
(item kind: (name) @keyword)
(item label: (name) @label)
(selector name: (name) @property)
(edge event: (name) @constant)
(edge source: (name) @label)
(edge target: (name) @label)
(call function: (name) @function.builtin)
(argument name: (name) @constant)
(device) @constant
(range) @number
(identifier) @constant
(boolean) @boolean
(number) @number
(unit) @type.builtin
(string) @string
(comment) @comment @spell
(operator) @operator
[ "=" "|" ":" "." ".." "->" ] @operator
[ "{" "}" "[" "]" "(" ")" ] @punctuation.bracket
[ "," ";" ] @punctuation.delimiter
