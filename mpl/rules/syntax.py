"""Syntax errors (MPL0xx): the lexer and the parser (:mod:`mpl.syntax`) report them.
"""

from __future__ import annotations

from mpl.rules.base import E, rule


RULES = (
    rule("MPL001", E, "syntax", "unexpected character", """
The text contains a character that is not part of the language: only names, numbers (with an
optional unit), strings, `{ } [ ] = | : , ; .`, comparison operators and `#` comments may
appear. The parser skips the character and goes on.
""", """
policy fast {
    cache { capacity = 8 $ }
}
""", """
policy fast {
    cache { capacity = 8 }
}
"""),
    rule("MPL002", E, "syntax", "unexpected token", """
A token appears where the grammar does not allow it; the message lists what was expected
(for example the `=` between a parameter name and its value). The parser recovers at the next
line, `;` or closing brace and reports every other error of the file as well.
""", """
policy fast {
    cache { capacity 8 }
}
""", """
policy fast {
    cache { capacity = 8 }
}
"""),
    rule("MPL003", E, "syntax", "unexpected end of file", """
The file ends inside a policy, block or rule: a closing `}` is missing. The message names the
construct that is still open.
""", """
policy fast {
    cache { capacity = 8 }
""", """
policy fast {
    cache { capacity = 8 }
}
"""),
    rule("MPL004", E, "syntax", "invalid literal", """
A number or string is malformed: a number with two decimal points, a number too large to
represent, or a string without its closing quote on the same line.
""", """
policy fast {
    cache { capacity = 8.0.1 }
}
""", """
policy fast {
    cache { capacity = 8 }
}
"""),
)
