# The exported script's property checks: each property export-python can assert, as recheck
# checks it (properties/*.cpp), over the records run_case makes (properties/export_runtime.py,
# which the script holds before this file). tests/python/export_agreement_test.cpp holds the two
# to the same verdicts.


def bitwise_difference(a, b):
    if (a is None) != (b is None):
        return f"defined: {'a tensor' if a is not None else 'None'} vs {'a tensor' if b is not None else 'None'}"
    if a is None:
        return None
    if a.dtype != b.dtype or a.shape != b.shape:
        return f"{a.dtype} {tuple(a.shape)} vs {b.dtype} {tuple(b.shape)}"
    if a.dtype.is_floating_point:
        # by their bits: -0.0 is not 0.0 here, and a NaN is itself
        bits = {2: torch.int16, 4: torch.int32, 8: torch.int64}[a.element_size()]
        same_a, same_b = a.contiguous().view(bits).reshape(-1), b.contiguous().view(bits).reshape(-1)
    else:
        same_a, same_b = a.reshape(-1), b.reshape(-1)
    if torch.equal(same_a, same_b):
        return None
    i = int((same_a != same_b).nonzero()[0])
    return f"element {i}: {a.reshape(-1)[i].item()!r} vs {b.reshape(-1)[i].item()!r}"


def ulp_difference(a, b, bound):
    """recheck's grads-match-eager comparison: bitwise, or within `bound` units in the last place
    at the reference's scale (its largest magnitude)."""
    d = bitwise_difference(a, b)
    if d is None or a is None or b is None or not a.dtype.is_floating_point or a.dtype != b.dtype \
            or a.shape != b.shape:
        return d
    x, y = a.double().reshape(-1), b.double().reshape(-1)
    scale = y.abs().max().item() if y.numel() else 0.0
    s = torch.tensor(scale, dtype=torch.float32 if a.dtype != torch.float64 else torch.float64)
    unit = (torch.nextafter(s, torch.tensor(float("inf"), dtype=s.dtype)) - s).item()
    if a.dtype == torch.bfloat16:
        unit *= 65536.0
    for i in range(x.numel()):
        u, v = x[i].item(), y[i].item()
        if u != u and v != v:
            continue
        if not (u != u or v != v) and abs(u - v) <= bound * unit:
            continue
        return f"element {i}: {u!r} vs {v!r}, beyond {bound} ulp of scale {scale!r}"
    return None


def check(prop, subject, eager, oracle):
    """The evidence that `prop` fails for `subject` (a run), or None when it holds."""
    common = lambda a, b: zip(range(min(len(a["iterations"]), len(b["iterations"]))), a["iterations"], b["iterations"])
    error_of = lambda r: None if "error" not in r else (r["error"]["phase"], r["error"]["type"], r["error"]["message"])
    # Both completed the iteration, or both raised the same error in the same phase of it (then
    # the state the error left is compared); where they part, errors-match judges.
    comparable = lambda s, e: error_of(s) == error_of(e)
    completed = lambda s, e: "error" not in s and "error" not in e
    at = lambda i, s: f"iteration {i}" + (" (after its error)" if "error" in s else "")
    if prop == "outputs-bitwise":
        for i, s, e in common(subject, eager):
            if not completed(s, e):
                continue
            for o, (x, y) in enumerate(zip(s["outputs"], e["outputs"])):
                if (d := bitwise_difference(x, y)):
                    return f"iteration {i}, output {o}: {d}"
            if (d := bitwise_difference(s["loss"], e["loss"])):
                return f"iteration {i}, loss: {d}"
    elif prop in ("grads-bitwise", "grads-match-eager"):
        reference = oracle if prop == "grads-bitwise" else eager
        for i, s, e in common(subject, reference):
            # After an error in backward, what the engine had accumulated depends on the order it
            # ran the graph, which checkpointing changes: compared with the oracle only.
            if not comparable(s, e) or (prop == "grads-match-eager" and "error" in s and s["error"]["phase"] != "forward"):
                continue
            for leaf, (x, y) in enumerate(zip(s["leaf_grads"], e["leaf_grads"])):
                d = bitwise_difference(x, y) if prop == "grads-bitwise" else ulp_difference(x, y, GRAD_ULP_BOUND)
                if d:
                    return f"{at(i, s)}, leaf v{leaf} .grad: {d}"
    elif prop == "hooks-match-eager":
        for i, s, e in common(subject, eager):
            if not comparable(s, e) or ("error" in s and s["error"]["phase"] != "forward"):
                continue
            by_site = lambda calls: {site: [c for c in calls if c[0] == site] for site, _, _ in calls}
            mine, theirs = by_site(s["hook_calls"]), by_site(e["hook_calls"])
            for site in list(theirs) + [x for x in mine if x not in theirs]:
                a, b = mine.get(site, []), theirs.get(site, [])
                where = f"{at(i, s)}, the hook at {site}"
                if len(a) != len(b):
                    return f"{where}: called {'more' if len(a) > len(b) else 'fewer'} times than eager mode's " \
                        f"({len(a)} vs {len(b)})"
                for k, (x, y) in enumerate(zip(a, b)):
                    if (d := ulp_difference(x[2], y[2], GRAD_ULP_BOUND)):
                        return f"{where}, call {k}, its gradient: {d}"
    elif prop == "hooks-bitwise":
        for i, s, o in common(subject, oracle):
            if not comparable(s, o):
                continue
            a, b = s["hook_calls"], o["hook_calls"]
            for k in range(max(len(a), len(b))):
                where = f"{at(i, s)}, hook call {k}"
                if k >= len(a) or k >= len(b):
                    return f"{where}: one {'more' if k < len(a) else 'fewer'} than the oracle's"
                if a[k][0] != b[k][0]:
                    return f"{where}: the hook at {a[k][0]}, the oracle's at {b[k][0]}"
                if (d := bitwise_difference(a[k][2], b[k][2])):
                    return f"{where} (the hook at {a[k][0]}), its gradient: {d}"
    elif prop == "module-state-matches-eager":
        for i, s, e in common(subject, eager):
            if not comparable(s, e) or ("error" in s and s["error"]["phase"] != "forward"):
                continue
            for module in sorted(set(s["modules"]) | set(e["modules"])):
                a, b = s["modules"].get(module, (0.0, 0, 0)), e["modules"].get(module, (0.0, 0, 0))
                # the running mean by its bits, as recheck compares it
                if a[1:] == b[1:] and struct.pack("<d", a[0]) == struct.pack("<d", b[0]):
                    continue
                state = f"its step counter {a[1]} vs {b[1]}, its running mean {a[0]!r} vs {b[0]!r}"
                if a[2] != b[2]:
                    return f"{at(i, s)}, module {module}: updated {'more' if a[2] > b[2] else 'fewer'} times than " \
                        f"eager mode's ({a[2]} vs {b[2]}): {state}"
                return f"{at(i, s)}, module {module}: updated as often as eager mode's, to another state: {state}"
    elif prop == "recompute-fidelity":
        for call in subject["calls"]:
            for k, recomputed in enumerate(call["calls"][1:], 1):
                if call["autocast"][k] != call["autocast"][0]:
                    return (f"{call['site']} at iteration {call['iteration']}, recomputation vs forward: autocast "
                            f"(cpu, cuda) {call['autocast'][k]} vs {call['autocast'][0]}")
                for o, (x, y) in enumerate(zip(recomputed, call["calls"][0])):
                    if (d := bitwise_difference(x, y)):
                        return f"{call['site']} at iteration {call['iteration']}, recomputed output {o} vs forward: {d}"
    elif prop == "rng-restored":
        for i, s, e in common(subject, eager):
            if completed(s, e) and (d := rng_difference(s["rng"], e["rng"])):
                return f"after iteration {i}: differs from eager: {d}"
    elif prop == "errors-match":
        describe = lambda x: "no error" if x is None else \
            f"{x['type']} in iteration {x['iteration']} {x['phase']}: {x['message']}"
        key = lambda x: None if x is None else (x["type"], x["message"], x["iteration"])
        # The first error a run raised in iteration i or later: where the runs part, each side
        # is named by its next error.
        next_error = lambda run, i: next((r["error"] for r in run["iterations"][i:] if "error" in r), None)
        for i, sr, er in common(subject, eager):
            if "error" not in sr and "error" not in er:
                continue
            s, e = sr.get("error") or next_error(subject, i), er.get("error") or next_error(eager, i)
            if s is not None and s["phase"] == "backward" and (d := rng_difference(s["rng"], s["rng_at_start"])):
                return f"{describe(s)}; RNG not restored when the error reached the caller: {d}"
            if key(s) != key(e):
                return f"{describe(s)} | eager: {describe(e)}"
            if (d := rng_difference(s["rng"], e["rng"])):
                return f"RNG after the error in iteration {i} differs from eager: {d}"
    elif prop == "no-side-effects":
        for i, s, e in common(subject, eager):
            if not comparable(s, e):
                continue
            for leaf, (x, y) in enumerate(zip(s["leaf_data"], e["leaf_data"])):
                if (d := bitwise_difference(x, y)):
                    return f"{at(i, s)}, leaf v{leaf} data: {d}"
            if s["flag"] != e["flag"]:
                return f"after {at(i, s)}: is-checkpointing flag {s['flag']}, eager {e['flag']}"
            if s["autocast"] != e["autocast"]:
                return f"after {at(i, s)}: autocast (cpu, cuda) left {s['autocast']}, eager {e['autocast']}"
    elif prop == "flag-in-body":
        for call in subject["calls"]:
            for k, reads in enumerate(call["flags"]):
                for n, flag in enumerate(reads):
                    if flag:
                        continue
                    returned = n + 1 == len(reads) and k < len(call["calls"])
                    point = f"once {call['site']}.body returned" if returned else f"before {call['site']}.body.ops[{n}]"
                    return (f"{call['site']} at iteration {call['iteration']}, "
                            f"{'forward' if k == 0 else f'recomputation {k}'}: is_checkpointing() read False {point}")
    elif prop in ("stash-kept", "stash-grads"):
        for i, s, o in common(subject, oracle):
            if not comparable(s, o):
                continue
            for site in list(s["stashed"]) + [x for x in o["stashed"] if x not in s["stashed"]]:
                a, b = s["stashed"].get(site), o["stashed"].get(site)
                where = f"after {at(i, s)}, the stash at {site}"
                if a is None or b is None:
                    return f"{where}: kept in {'the oracle' if a is None else 'this'} run only"
                if prop == "stash-grads":
                    if a["what"] == b["what"] == "a tensor" and (d := bitwise_difference(a["grad"], b["grad"])):
                        return f"{where} .grad: {d}"
                    continue
                for key in ("what", "requires_grad", "is_leaf"):
                    if a.get(key) != b.get(key):
                        return f"{where}: {key} {a.get(key)}, the oracle's {b.get(key)}"
                if a["what"] == "a tensor" and (d := bitwise_difference(a["data"], b["data"])):
                    return f"{where} data: {d}"
                if a.get("version") != b.get("version"):
                    return f"{where}: _version {a.get('version')}, the oracle's {b.get('version')}"
    elif prop == "discard-own-outputs":
        for i, s in enumerate(subject["iterations"]):
            for d in s["discards"]:
                if d["touched"]:
                    return f"{at(i, s)}, discard {d['site']} of {d['checkpoint']}: it changed the caller's " \
                        + ", ".join(d["touched"])
    elif prop == "discard-recomputed":
        for i, s in enumerate(subject["iterations"]):
            for d in s["discards"] if "error" not in s else ():
                where = f"iteration {i}, outputs of {d['checkpoint']} discarded at {d['site']}"
                if not d["freed"]:
                    continue
                if not d["hook_reached"]:
                    if d["recomputations"]:
                        return f"{where}: recomputed {d['recomputations']} times, though backward never reached its hook"
                    continue
                if d["recomputations"] != 1:
                    return f"{where}: recomputed {d['recomputations']} times, not once"
                for o, (x, y) in enumerate(zip(d["after"], d["forward"])):
                    if d["after_bytes"][o] != d["forward_bytes"][o] or (x is None) != (y is None):
                        return (f"{where}, output {o}: its storage holds {d['after_bytes'][o]} bytes after the "
                                f"iteration, {d['forward_bytes'][o]} after forward")
                    if (diff := bitwise_difference(x, y)):
                        return f"{where}, output {o}: its data after the iteration differs from forward's: {diff}"
    elif prop == "grad-released":
        for i, s in enumerate(subject["iterations"]):
            if s["holding_grad"]:
                return f"after {at(i, s)}: recomputation inputs still holding .grad: {', '.join(s['holding_grad'])}"
    return None
