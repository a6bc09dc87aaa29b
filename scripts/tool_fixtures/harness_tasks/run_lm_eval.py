"""Register the pseudo models, then run lm-eval's own CLI (sys.argv holds its arguments)."""
import hashlib
import re

from lm_eval.api.model import LM
from lm_eval.api.registry import register_model
from lm_eval.utils import simple_parse_args_string


def _u(*parts):
    h = hashlib.sha256("|".join(map(str, parts)).encode()).digest()
    return int.from_bytes(h[:8], "big") / 2 ** 64


def _oracle():
    """{passage: answer} from the task data beside this script (the pseudo models "know" the answer
    with probability ``skill``)."""
    import json

    out = {}
    with open("gen.json") as f:
        for line in f:
            r = json.loads(line)
            out[r["passage"]] = r["answer"]
    with open("mc.json") as f:
        for line in f:
            r = json.loads(line)
            out[r["passage"]] = r["choices"][r["label"]]
    return out


class PseudoLM(LM):
    """A deterministic stand-in model: it knows an item's answer with probability ``skill``; then the
    right continuation gets the highest log-likelihood and generations give the answer, otherwise a
    passage word; generations come in three formats (only the first matches strict-match)."""

    NAME = "pseudo"
    SKILL = 0.6

    def __init__(self, skill=None, **kwargs):
        super().__init__()
        self.skill = float(self.SKILL if skill is None else skill)
        self.oracle = _oracle()

    @classmethod
    def create_from_arg_string(cls, arg_string, additional_config=None):
        return cls(**simple_parse_args_string(arg_string))

    def _gold(self, ctx):
        passage = ctx.split("Passage:", 1)[-1].split("\n", 1)[0].strip()
        return passage, self.oracle.get(passage)

    def loglikelihood(self, requests, disable_tqdm=False):
        out = []
        for r in requests:
            ctx, cont = r.args
            _p, gold = self._gold(ctx)
            knows = _u(self.NAME, self.skill, ctx) < self.skill
            bonus = 5.0 if (knows and cont.strip() == gold) else 0.0
            ll = -3.0 * _u(self.NAME, ctx, cont) - 0.1 * len(cont) + bonus
            out.append((ll, bool(bonus)))
        return out

    def generate_until(self, requests, disable_tqdm=False):
        out = []
        for r in requests:
            ctx = r.args[0]
            passage, gold = self._gold(ctx)
            words = re.findall(r"\w+", passage)
            if gold and _u(self.NAME, self.skill, "know", ctx) < self.skill:
                word = gold
            else:
                word = words[int(_u(self.NAME, "w", ctx) * len(words))]
            style = int(_u(self.NAME, "style", ctx) * 3)
            out.append([f"The answer is {word}.", f"{word}", f"I think it is {word} or maybe not"][style])
        return out

    def loglikelihood_rolling(self, requests, disable_tqdm=False):
        return [-10.0 * _u(self.NAME, r.args[0]) for r in requests]


@register_model("pseudo")
class Pseudo(PseudoLM):
    pass


@register_model("pseudo_alpha")
class PseudoAlpha(PseudoLM):
    NAME = "alpha"
    SKILL = 0.85


@register_model("pseudo_beta")
class PseudoBeta(PseudoLM):
    NAME = "beta"
    SKILL = 0.5


if __name__ == "__main__":
    from lm_eval.__main__ import cli_evaluate

    cli_evaluate()
