"""process_results of the mrc_gen / mrc_f1 fixture tasks: exact match and a SQuAD-style token F1."""
import collections
import re


def _tokens(s):
    return re.findall(r"\w+", str(s).lower())


def token_f1(pred, gold):
    p, g = _tokens(pred), _tokens(gold)
    if not p or not g:
        return float(p == g)
    common = sum((collections.Counter(p) & collections.Counter(g)).values())
    if common == 0:
        return 0.0
    prec, rec = common / len(p), common / len(g)
    return 2 * prec * rec / (prec + rec)


def process_results(doc, results):
    pred = results[0]
    return {"exact_match": float(str(pred).strip().lower() == str(doc["answer"]).lower()),
            "f1": token_f1(pred, doc["answer"])}


def process_f1(doc, results):
    return {"f1": token_f1(results[0], doc["answer"])}
