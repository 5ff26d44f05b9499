; one indent level per open brace or bracket (the formatter's layout: 4 spaces)
[ (policy) (block) (item) (rule) (list) ] @indent.begin
[ "}" "]" ] @indent.branch @indent.end
(comment) @indent.auto
