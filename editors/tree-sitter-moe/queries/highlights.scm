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
(identifier) @constant
(boolean) @boolean
(number) @number
(unit) @type.builtin
(string) @string
(comment) @comment @spell
(operator) @operator
[ "=" "|" ":" "." ] @operator
[ "{" "}" "[" "]" ] @punctuation.bracket
[ "," ";" ] @punctuation.delimiter
