"""How a checkpoint function given by path is called, when its caller says so: the spec
python:FILE.py:ATTR@CALL, where CALL lists what ATTR takes, in order, separated by commas (words
a shell leaves alone, so that a replay line needs no quoting):

  fn          the function to run (recheck's body)
  args        the body's arguments, unpacked (*args)
  tuple, list the body's arguments as one tuple, one list
  empty       an empty tuple (a parameter list the function wants and recheck has none for)
  distribute  Megatron's distribute_saved_activations flag (False: recheck draws no distributing
              checkpoint for a function called this way)
  options     the case's call options, as keywords (**options)
  true, false, none
  NAME=WORD   a keyword argument, WORD one of the words above but args and options

`checkpoint@fn,tuple,empty,true` calls checkpoint(fn, (x, y), (), True), as a vendored
`checkpoint(func, inputs, params, flag)` is called. ATTR may be dotted (CheckpointFunction.apply).
Part of recheck's Python bridge (executed in the module recheck_bridge beside bridge.py).
"""

_VALUES = {"true": True, "false": False, "none": None, "empty": ()}
_WORDS = ("fn", "args", "tuple", "list", "empty", "distribute", "options", "true", "false", "none")


def split_convention(attr):
    """(the attribute, its calling convention or None): "checkpoint@fn,args" -> ("checkpoint", "fn,args")."""
    name, at, call = attr.partition("@")
    return name, (call if at else None)


def _word(word):
    if word not in _WORDS:
        raise CodeImportError(f"'{word}' is not a word of a calling convention (known: {', '.join(_WORDS)}, "
                              f"and NAME=WORD for a keyword)")
    return word


def calling_convention(call):
    """A caller(function, body, distribute, args, options) that calls the function as `call` says;
    raises CodeImportError, in one line naming the word, where `call` is not one."""
    positional = []
    keywords = {}
    for token in call.split(","):
        name, equals, word = token.partition("=")
        if equals:
            if not name.isidentifier():
                raise CodeImportError(f"'{token}': a keyword is NAME=WORD, NAME an identifier")
            if _word(word) in ("args", "options"):
                raise CodeImportError(f"'{token}': {word} unpacks, so it cannot be a keyword's value")
            keywords[name] = word
        else:
            positional.append(_word(token))
    words = positional + list(keywords.values())
    if words.count("fn") != 1:
        raise CodeImportError("a calling convention passes fn (the function to run) once")
    if sum(words.count(w) for w in ("args", "tuple", "list")) != 1:
        raise CodeImportError("a calling convention passes the arguments once: args, tuple or list")

    def value(word, body, distribute, args):
        if word == "fn":
            return body
        if word == "tuple":
            return tuple(args)
        if word == "list":
            return list(args)
        if word == "distribute":
            return distribute
        return _VALUES[word]

    def caller(function, body, distribute, args, options):
        given = []
        for word in positional:
            if word == "args":
                given.extend(args)
            elif word != "options":
                given.append(value(word, body, distribute, args))
        named = {name: value(word, body, distribute, args) for name, word in keywords.items()}
        if "options" in positional:
            named.update(options)
        return function(*given, **named)

    return caller


def describe_call(attr, call):
    """How the convention calls ATTR, in Python: checkpoint(fn, *args, flag=True)."""
    shown = []
    for token in call.split(","):
        name, equals, word = token.partition("=")
        word = word if equals else name
        text = {"args": "*args", "options": "**options", "true": "True", "false": "False", "none": "None",
                "empty": "()", "tuple": "tuple(args)", "list": "list(args)"}.get(word, word)
        shown.append(f"{name}={text}" if equals else text)
    return f"{attr}({', '.join(shown)})"


def try_convention(function, caller, attr, call):
    """Calls the function once as the convention says, on a body of one tensor, before any case:
    a convention that does not fit it is refused here, in one line saying what was tried."""
    x = torch.ones(2, dtype=torch.float64, requires_grad=True)
    try:
        outputs = caller(function, lambda *values: values[0] * 2, False, (x,), {})
        first = outputs[0] if isinstance(outputs, (tuple, list)) else outputs
        if not torch.is_tensor(first):
            raise TypeError(f"it returned {type(first).__name__}, not the body's tensor")
        if first.requires_grad:
            first.sum().backward()
    except Exception as error:
        raise CodeImportError(f"recheck tried {describe_call(attr, call)} on a body of one tensor, and "
                              f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
                              f" (give the calling convention as ATTR@WORDS: docs/python.md)") from error
